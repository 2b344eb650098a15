//! Order endpoints: `/api/my_orders`, `/api/pay_order`, `/api/cancel_order` (shopper)
//! and `/api/list_orders` (operators).

use super::Order;
use crate::{error::AppResult, listing::Page};
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    super::{
        give_back::give_back,
        lifecycle::{self, Cancel, Payment},
        OrderStatus,
    },
    crate::{
        auth::caller::{operator, user},
        backend::{
            db_clock,
            layout::{bucket_of, DRAIN_GRACE_MS},
            Backend,
        },
        error::{AppError, ErrorCode},
        listing::Paging,
        orders::results::StoredResult,
        voucher::store as vouchers,
    },
};

/// Orders a page of `my_orders` holds unless asked, and at most.
#[cfg(feature = "ssr")]
pub const MY_ORDERS_PAGE: crate::listing::PageSize = crate::listing::PageSize { default: 50, most: 100 };
/// Orders a page of `list_orders` holds unless asked, and at most.
#[cfg(feature = "ssr")]
pub const ORDERS_PAGE: crate::listing::PageSize = crate::listing::PageSize { default: 100, most: 1_000 };

/// The caller's orders, newest first, a page at a time: `limit` 1–100 (50 when
/// absent), `after` the `next` of the page before.
#[server(prefix = "/api", endpoint = "my_orders", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn my_orders(limit: Option<i64>, after: Option<String>) -> AppResult<Page<Order>> {
    let backend = expect_context::<Backend>();
    let user_id = user::<MyOrders>().await?;
    let paging = Paging::asked(limit, after.as_deref(), MY_ORDERS_PAGE)?;
    let rows = lifecycle::of_user(&backend.db, user_id, paging.before, paging.rows()).await?;
    Ok(paging.page(rows, order_id))
}
crate::error::refuses!(MyOrders:);

/// Pays the caller's unpaid order (a simulated payment). Paying a paid order answers
/// it again. Refusals: `unknown_order`, `order_queued` (not saved yet; retry),
/// `order_expired` (its deadline passed), `order_cancelled`.
#[server(prefix = "/api", endpoint = "pay_order", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn pay_order(order_id: String) -> AppResult<Order> {
    let backend = expect_context::<Backend>();
    let user_id = user::<PayOrder>().await?;
    let order_id = crate::order_ids::parse(&order_id)?;
    let now = db_clock::now_ms(&backend.db).await?;
    match lifecycle::pay(&backend.db, order_id, user_id, now).await? {
        Payment::Paid(order) => Ok(order),
        Payment::Expired => Err(ErrorCode::OrderExpired.into()),
        Payment::Cancelled => Err(ErrorCode::OrderCancelled.into()),
        Payment::NotFound => Err(not_saved_yet(&backend, order_id, user_id).await?.into()),
    }
}
crate::error::refuses!(PayOrder: UnknownOrder, OrderQueued, OrderExpired, OrderCancelled);

/// Cancels the caller's unpaid order; its unit goes back on sale and the caller may
/// grab the voucher again. Cancelling a cancelled order answers it again. A shopper
/// may cancel only a few of one sale's orders (`cancel_limit`); past that an order can
/// be paid, or lapses at its deadline. An order past its deadline has lapsed: it is
/// cancelled for the `timeout`, as the sweeper would, and is not counted among the
/// shopper's cancels. Refusals: `unknown_order`, `order_queued`,
/// `order_paid`, `cancel_limit`.
#[server(prefix = "/api", endpoint = "cancel_order", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn cancel_order(order_id: String) -> AppResult<Order> {
    let backend = expect_context::<Backend>();
    let user_id = user::<CancelOrder>().await?;
    let order_id = crate::order_ids::parse(&order_id)?;
    let now = db_clock::now_ms(&backend.db).await?;
    match lifecycle::cancel_by_shopper(&backend.db, order_id, user_id, now).await? {
        Cancel::Cancelled(order, owed) => {
            // Should Redis fail here, the sweeper finishes the give-back: it is owed.
            if let Err(e) = give_back(&backend, &owed).await {
                tracing::warn!(order_id, "cancel: give-back left to the sweeper: {e}");
            }
            Ok(order)
        }
        Cancel::Already(order) => Ok(order),
        Cancel::Paid => Err(ErrorCode::OrderPaid.into()),
        Cancel::Limit => Err(ErrorCode::CancelLimit.into()),
        Cancel::NotFound => Err(not_saved_yet(&backend, order_id, user_id).await?.into()),
    }
}
crate::error::refuses!(CancelOrder: UnknownOrder, OrderQueued, OrderPaid, CancelLimit);

/// A voucher's orders, newest first, a page at a time (operators): `status` one of
/// `unpaid`, `paid`, `cancelled` or all when absent; `limit` 1–1000, default 100;
/// `after` the `next` of the page before.
#[server(prefix = "/api", endpoint = "list_orders", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn list_orders(
    voucher_id: i64,
    status: Option<String>,
    limit: Option<i64>,
    after: Option<String>,
) -> AppResult<Page<Order>> {
    let backend = expect_context::<Backend>();
    operator::<ListOrders>()?;
    let status = match status.as_deref() {
        None => None,
        Some(name) => Some(OrderStatus::parse(name).ok_or_else(|| {
            AppError::invalid(format!(
                "status must be unpaid, paid or cancelled, not {:?}.",
                name.chars().take(20).collect::<String>()
            ))
            .on("status")
        })?),
    };
    let paging = Paging::asked(limit, after.as_deref(), ORDERS_PAGE)?;
    vouchers::get(&backend.db, voucher_id).await?.ok_or(ErrorCode::UnknownVoucher)?;
    let rows = lifecycle::of_voucher(&backend.db, voucher_id, status, (paging.before, paging.rows())).await?;
    Ok(paging.page(rows, order_id))
}
crate::error::refuses!(ListOrders: UnknownVoucher);

/// An order's id, for a page's cursor.
#[cfg(feature = "ssr")]
fn order_id(order: &Order) -> i64 {
    order.order_id.parse().unwrap_or_default()
}

/// An order the database did not have for this shopper: granted and still on its way
/// to the database, or saved since the database was asked (the worker saves, then
/// says so in Redis): `order_queued` either way, and the retry finds it. Before the
/// second case counted, a shopper who pressed Pay or Cancel as their order was saved
/// could be told it did not exist. Else not theirs at all (`unknown_order`). Grab
/// results live per sale, so the live sales are asked.
#[cfg(feature = "ssr")]
async fn not_saved_yet(backend: &Backend, order_id: i64, user_id: i64) -> AppResult<ErrorCode> {
    let live = vouchers::live(&backend.db, DRAIN_GRACE_MS).await?;
    if live.is_empty() {
        return Ok(ErrorCode::UnknownOrder);
    }
    let results_of =
        |v: &vouchers::VoucherRow| backend.bucket_keys(v.bucket(bucket_of(user_id, v.shards()))).results.clone();
    let asks = live.iter().map(|v| redis::Cmd::hget(results_of(v), order_id));
    let results = backend.redis.query_each::<Option<String>>(asks).await.into_iter().collect::<Result<Vec<_>, _>>()?;
    let queued = results.iter().filter_map(|r| r.as_deref().and_then(StoredResult::parse)).any(
        |r| matches!(r, StoredResult::Queued { user_id: u } | StoredResult::Success { user_id: u } if u == user_id),
    );
    Ok(if queued { ErrorCode::OrderQueued } else { ErrorCode::UnknownOrder })
}
