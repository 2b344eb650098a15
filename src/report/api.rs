//! `/api/sale_report` (JSON) and `GET /api/sale_report.csv?voucher_id=N` (the grabs
//! per second), for operators.

use super::Report;
use crate::error::AppResult;
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    super::{context::Context, store, Latency, Outcome, Second, Units},
    crate::{
        audit::store as audit,
        auth::caller::{operator, Caller},
        backend::Backend,
        error::{AppError, ErrorCode},
        voucher::{left::units_left, store as vouchers},
    },
    axum::{
        extract::{rejection::QueryRejection, Extension, Query, State},
        http::header,
        response::{IntoResponse, Response},
        routing::get,
        Router,
    },
    std::collections::BTreeMap,
};

/// Operator actions a report lists at most.
#[cfg(feature = "ssr")]
const ACTIONS_LIMIT: i64 = 1_000;

/// The report of one sale (operators), while it runs or after it ended: see
/// [`Report`] and the README's "The report after a sale".
#[server(prefix = "/api", endpoint = "sale_report", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn sale_report(voucher_id: i64) -> AppResult<Report> {
    let state = Context::get();
    operator::<SaleReport>()?;
    Ok(build(&state, voucher_id).await?.in_steps())
}
crate::error::refuses!(SaleReport: UnknownVoucher);

/// The path of the CSV (GET).
pub const CSV_PATH: &str = "/api/sale_report.csv";
/// What the CSV refuses beyond the front door (`server::refusals`).
#[cfg(feature = "ssr")]
pub const CSV_REFUSES: &[crate::error::ErrorCode] =
    &[crate::error::ErrorCode::InvalidInput, crate::error::ErrorCode::UnknownVoucher];

/// Reads the report of `voucher_id`, after adding this process's counts, second by
/// second (the CSV's; `sale_report` answers it in steps, [`Report::in_steps`]).
#[cfg(feature = "ssr")]
pub async fn build(state: &Context, voucher_id: i64) -> AppResult<Report> {
    let db = &state.backend.db;
    let row = vouchers::get(db, voucher_id).await?.ok_or(ErrorCode::UnknownVoucher)?;
    state.tally.flush(db).await?;
    let left = units_left(&state.backend, std::slice::from_ref(&row)).await?[0];
    let store::Record { seconds, latency, orders, dead_letters, lost } = store::read(db, voucher_id).await?;
    let mut answers: BTreeMap<Outcome, i64> = Outcome::ALL.iter().map(|&o| (o, 0)).collect();
    for (outcome, n) in seconds.values().flatten() {
        *answers.entry(*outcome).or_default() += n;
    }
    let granted = answers[&Outcome::Granted];
    let sold_out_at = match row.sold_out_at {
        Some(at) => Some(at),
        None => sold_out_in_redis(&state.backend, voucher_id).await,
    };
    Ok(Report {
        voucher: row.to_voucher(left),
        generated_at: chrono::Utc::now(),
        sold_out_at: sold_out_at.and_then(chrono::DateTime::from_timestamp_millis),
        time_to_sell_out_ms: sold_out_at.map(|at| at - row.begins_at),
        answers,
        seconds: seconds.into_iter().map(|(at, answers)| Second { at, answers }).collect(),
        step_secs: 1,
        latency: Latency::from_counts(&latency),
        orders,
        units: Units {
            on_sale: row.stock,
            added: row.added,
            withdrawn: row.withdrawn,
            sold: orders.unpaid + orders.paid,
            returned: orders.cancelled_by_shopper + orders.timed_out,
            // Units ever put on sale: withdrawn ones were on sale once (a withdrawal
            // of units given back leaves no grant beyond them).
            resold: (granted - (row.stock + row.withdrawn)).max(0),
            left,
            dead_letters,
            lost,
        },
        actions: audit::list(db, Some(voucher_id), None, ACTIONS_LIMIT).await?,
    })
}

/// The first sell-out as the sale's Redis window holds it, before the live sampler
/// copied it to the database (a quarter of a second at most); none if Redis cannot say.
#[cfg(feature = "ssr")]
async fn sold_out_in_redis(backend: &Backend, voucher_id: i64) -> Option<i64> {
    use redis::AsyncCommands;
    let window = &backend.keys(voucher_id).window;
    backend.redis.clone().hget::<_, _, Option<i64>>(window, "sold_out_at").await.ok().flatten()
}

/// The CSV route, for the app's router.
#[cfg(feature = "ssr")]
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    std::sync::Arc<Context>: axum::extract::FromRef<S>,
{
    Router::new().route(CSV_PATH, get(report_csv))
}

#[cfg(feature = "ssr")]
#[derive(serde::Deserialize)]
struct Which {
    voucher_id: i64,
}

#[cfg(feature = "ssr")]
async fn report_csv(
    State(state): State<std::sync::Arc<Context>>,
    caller: Option<Extension<Caller>>,
    which: Result<Query<Which>, QueryRejection>,
) -> Response {
    // The front door admitted operators only (`server::access`).
    if caller.is_none() {
        return AppError::from(ErrorCode::OperatorRequired).into_response();
    }
    let Ok(Query(Which { voucher_id })) = which else {
        return AppError::invalid("Give the voucher: ?voucher_id=<id>.").on("voucher_id").into_response();
    };
    match build(&state, voucher_id).await {
        Ok(report) => {
            let disposition = format!("attachment; filename=\"sale-report-{voucher_id}.csv\"");
            let content_type = "text/csv; charset=utf-8".to_owned();
            ([(header::CONTENT_TYPE, content_type), (header::CONTENT_DISPOSITION, disposition)], csv(&report))
                .into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// The grabs per second as CSV: one line per second with a grab, oldest first (a
/// second without one is left out, so a sale's file grows with its grabs, not its
/// length), a column per outcome.
#[cfg(feature = "ssr")]
pub fn csv(report: &Report) -> String {
    let mut out = String::from("second");
    for &o in Outcome::ALL {
        out.push(',');
        out.push_str(o.as_str());
    }
    out.push('\n');
    for second in &report.seconds {
        let time = chrono::DateTime::from_timestamp(second.at, 0).unwrap_or_default();
        out.push_str(&time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        for &o in Outcome::ALL {
            out.push_str(&format!(",{}", second.answers.get(&o).copied().unwrap_or(0)));
        }
        out.push('\n');
    }
    out
}
