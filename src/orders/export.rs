//! `GET /api/orders.csv?voucher_id=N`: a sale's orders as CSV, for operators. Streamed
//! a page at a time ([`PAGE`] orders, one indexed query each): a sale of any size is
//! sent without holding its orders in memory. The caller's access is asked again
//! before each page, as the live feed asks before each frame: an operator removed or
//! signed out while a long export streams gets no further page.

use super::{lifecycle, Order};
use crate::{
    auth::{caller::Caller, context::Context as Accounts},
    backend::Backend,
    error::{AppError, ErrorCode},
    voucher::store as vouchers,
};
use axum::extract::rejection::QueryRejection;
use axum::{
    body::{Body, Bytes},
    extract::{Extension, FromRef, Query, State},
    http::{header, HeaderMap},
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use chrono::SecondsFormat;
use futures::StreamExt;
use std::sync::Arc;

/// The path (GET).
pub const PATH: &str = "/api/orders.csv";
/// What the export refuses beyond the front door (`server::refusals`).
pub const REFUSES: &[ErrorCode] = &[ErrorCode::InvalidInput, ErrorCode::UnknownVoucher];
/// Orders read and sent at a time.
const PAGE: i64 = 1_000;
/// The columns, in order, and what each holds: the header line, and the API document's
/// `OrdersCsvLine`.
pub const COLUMNS: [(&str, &str); 8] = [
    ("order_id", "The order's id (decimal digits)."),
    ("voucher_id", "The sale's voucher."),
    ("user_id", "The shopper's account."),
    ("status", "`unpaid`, `paid` or `cancelled`."),
    ("created_at", "When the order was granted (RFC 3339, UTC, milliseconds)."),
    ("pay_deadline", "When an unpaid order is cancelled (RFC 3339, UTC, milliseconds)."),
    ("cancel_reason", "Why it was cancelled (`timeout`, `shopper`), or empty."),
    ("price", "What the shopper pays, in minor units (cents)."),
];

/// The route, for the app's router (inside its request cap; the body streams after).
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Backend: FromRef<S>,
    Arc<Accounts>: FromRef<S>,
{
    Router::new().route(PATH, get(orders_csv))
}

#[derive(serde::Deserialize)]
struct Which {
    voucher_id: i64,
}

async fn orders_csv(
    State(backend): State<Backend>,
    State(accounts): State<Arc<Accounts>>,
    caller: Option<Extension<Caller>>,
    headers: HeaderMap,
    which: Result<Query<Which>, QueryRejection>,
) -> Response {
    // The front door admitted operators only (`server::access`), and says who.
    let Some(Extension(Caller(actor))) = caller else {
        return AppError::from(ErrorCode::OperatorRequired).into_response();
    };
    let Ok(Query(Which { voucher_id })) = which else {
        return AppError::invalid("Give the voucher: ?voucher_id=<id>.").on("voucher_id").into_response();
    };
    match vouchers::get(&backend.db, voucher_id).await {
        Ok(Some(_)) => {}
        Ok(None) => return AppError::from(ErrorCode::UnknownVoucher).into_response(),
        // The database away: a retryable outage, as every call answers one.
        Err(e) => return AppError::from(e).into_response(),
    }
    tracing::info!(%actor, voucher_id, "orders exported");
    let db = backend.db.clone();
    let still_allowed = Arc::new(move || accounts.secrets.actor(&headers).is_some());
    let pages = futures::stream::unfold(Some(0_i64), move |after| {
        let (db, still_allowed) = (db.clone(), still_allowed.clone());
        async move {
            let after = after?;
            if !still_allowed() {
                // Cut short, as for an error: the client never takes it for a whole file.
                tracing::warn!(voucher_id, "orders.csv: the caller's access ended mid-export");
                return Some((Err(std::io::Error::other("access ended")), None));
            }
            match lifecycle::page_of_voucher(&db, voucher_id, after, PAGE).await {
                Ok(orders) if orders.is_empty() => None,
                Ok(orders) => {
                    let last = orders.last().and_then(|o| o.order_id.parse().ok());
                    let next = last.filter(|_| orders.len() as i64 == PAGE);
                    Some((Ok::<_, std::io::Error>(Bytes::from(lines(&orders))), next))
                }
                Err(e) => {
                    // The client sees the answer cut short, not a file that looks whole.
                    tracing::error!(voucher_id, "orders.csv: {e}");
                    Some((Err(std::io::Error::other("database")), None))
                }
            }
        }
    });
    let body = futures::stream::once(async { Ok(Bytes::from(header())) }).chain(pages);
    let disposition = format!("attachment; filename=\"orders-{voucher_id}.csv\"");
    (
        [(header::CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()), (header::CONTENT_DISPOSITION, disposition)],
        Body::from_stream(body),
    )
        .into_response()
}

/// The first line: the columns' names.
pub fn header() -> String {
    COLUMNS.map(|(column, _)| column).join(",") + "\n"
}

/// Orders as CSV lines. Every field is a number, a fixed word or a time: nothing to
/// quote.
pub fn lines(orders: &[Order]) -> String {
    let time = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(SecondsFormat::Millis, true);
    orders
        .iter()
        .map(|o| {
            let reason = o.cancel_reason.map(|r| r.as_str()).unwrap_or_default();
            format!(
                "{},{},{},{},{},{},{reason},{}\n",
                o.order_id,
                o.voucher_id,
                o.user_id,
                o.status.as_str(),
                time(o.created_at),
                time(o.pay_deadline),
                o.price
            )
        })
        .collect()
}
