//! The order lifecycle in SQL: `unpaid → paid` or `unpaid → cancelled`, nothing else.
//! Every change is one conditional statement (`WHERE status = 'unpaid'`), so the
//! database decides every race between a payment, a shopper's cancel and the
//! sweeper's timeout: exactly one of them happens. Each takes its voucher's row lock
//! first (`voucher::store::lock`), as the worker does before it inserts orders: an
//! order updated here and then waiting for its voucher, while the worker held the
//! voucher and waited on that order's one-per-shopper index entry, was a deadlock
//! PostgreSQL broke after a second by failing one side.

use super::{CancelReason, Order, OrderStatus};
use crate::{
    backend::{db_clock, Db, Tx},
    voucher::store as vouchers,
};

/// A give-back the database has done and Redis still owes (`restocks_owed`).
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Owed {
    pub order_id: i64,
    pub voucher_id: i64,
    pub user_id: i64,
}

/// What paying came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payment {
    /// Paid, now or before (paying twice answers the same order).
    Paid(Order),
    /// No such order of this shopper.
    NotFound,
    /// Cancelled before the payment; `Expired` when the deadline passed first.
    Cancelled,
    Expired,
}

/// What a shopper's cancel came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cancel {
    /// Cancelled now: Redis owes the give-back.
    Cancelled(Order, Owed),
    /// Cancelled before (cancelling twice answers the same order).
    Already(Order),
    NotFound,
    Paid,
    /// Unpaid, and its shopper has cancelled [`MOST_SHOPPER_CANCELS`] of the sale's
    /// orders already.
    Limit,
}

/// How many of one sale's orders one shopper may cancel. Each cancel lets them grab
/// again, and each grab leaves an order row, a stream entry and restock events behind:
/// without a bound one account could grow the database for as long as a sale runs.
/// An order past it can still be paid, or lapses at its deadline (so a shopper's
/// orders of a sale grow by one a payment window at most).
pub const MOST_SHOPPER_CANCELS: i64 = 3;

const ORDER_COLUMNS: &str = "o.id, o.voucher_id, o.user_id, v.title, o.status, o.created_at, o.pay_deadline, \
     o.cancel_reason, o.price";

type OrderRow = (i64, i64, i64, String, String, i64, i64, Option<String>, i64);

/// The order a row holds. The schema allows only the statuses and reasons there are;
/// a row holding another (written by hand) reads as cancelled for no known reason.
fn order(row: OrderRow) -> Order {
    let (id, voucher_id, user_id, title, status, created_at, pay_deadline, cancel_reason, price) = row;
    let at = |ms| chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
    Order {
        order_id: id.to_string(),
        voucher_id,
        user_id,
        title,
        status: OrderStatus::parse(&status).unwrap_or_else(|| {
            tracing::warn!(order_id = id, status, "an order row with an unknown status: read as cancelled");
            OrderStatus::Cancelled
        }),
        created_at: at(created_at),
        pay_deadline: at(pay_deadline),
        cancel_reason: cancel_reason.as_deref().and_then(CancelReason::parse),
        price,
        currency: crate::money::currency().to_owned(),
    }
}

/// The shopper's order with this id.
pub async fn get_for_user(db: &Db, order_id: i64, user_id: i64) -> sqlx::Result<Option<Order>> {
    let sql = format!(
        "SELECT {ORDER_COLUMNS} FROM orders o JOIN vouchers v ON v.id = o.voucher_id WHERE o.id = $1 AND o.user_id = $2"
    );
    let row: Option<OrderRow> = sqlx::query_as(&sql).bind(order_id).bind(user_id).fetch_optional(db).await?;
    Ok(row.map(order))
}

/// The shopper's orders, newest first, older than `before` when given.
pub async fn of_user(db: &Db, user_id: i64, before: Option<i64>, limit: i64) -> sqlx::Result<Vec<Order>> {
    let sql = format!(
        "SELECT {ORDER_COLUMNS} FROM orders o JOIN vouchers v ON v.id = o.voucher_id \
         WHERE o.user_id = $1 AND ($2 IS NULL OR o.id < $2) ORDER BY o.id DESC LIMIT $3"
    );
    let rows: Vec<OrderRow> = sqlx::query_as(&sql).bind(user_id).bind(before).bind(limit).fetch_all(db).await?;
    Ok(rows.into_iter().map(order).collect())
}

/// A voucher's orders, newest first, of one status or all, older than `before` when
/// given.
pub async fn of_voucher(
    db: &Db,
    voucher_id: i64,
    status: Option<OrderStatus>,
    (before, limit): (Option<i64>, i64),
) -> sqlx::Result<Vec<Order>> {
    let sql = format!(
        "SELECT {ORDER_COLUMNS} FROM orders o JOIN vouchers v ON v.id = o.voucher_id \
         WHERE o.voucher_id = $1 AND ($2 IS NULL OR o.status = $2) AND ($3 IS NULL OR o.id < $3) \
         ORDER BY o.id DESC LIMIT $4"
    );
    let status = status.map(OrderStatus::as_str);
    let rows: Vec<OrderRow> =
        sqlx::query_as(&sql).bind(voucher_id).bind(status).bind(before).bind(limit).fetch_all(db).await?;
    Ok(rows.into_iter().map(order).collect())
}

/// A voucher's orders after `after_id`, oldest first, `limit` of them: a page of the
/// CSV export (keyset paging: each page one indexed query, however far in).
pub async fn page_of_voucher(db: &Db, voucher_id: i64, after_id: i64, limit: i64) -> sqlx::Result<Vec<Order>> {
    let sql = format!(
        "SELECT {ORDER_COLUMNS} FROM orders o JOIN vouchers v ON v.id = o.voucher_id \
         WHERE o.voucher_id = $1 AND o.id > $2 ORDER BY o.id LIMIT $3"
    );
    let rows: Vec<OrderRow> = sqlx::query_as(&sql).bind(voucher_id).bind(after_id).bind(limit).fetch_all(db).await?;
    Ok(rows.into_iter().map(order).collect())
}

/// Pays the shopper's order if it is unpaid and its deadline has not passed: by
/// `now_ms` before the sale's lock is taken, by the database's clock once it is held.
/// An order that is not theirs (or not saved yet), or that is paid or cancelled
/// already, is answered from a read: guessing at order ids, or paying again and again,
/// never takes the write lock the worker needs.
pub async fn pay(db: &Db, order_id: i64, user_id: i64, now_ms: i64) -> sqlx::Result<Payment> {
    let Some(before) = get_for_user(db, order_id, user_id).await? else { return Ok(Payment::NotFound) };
    if before.status != OrderStatus::Unpaid {
        return Ok(payment(before));
    }
    // Past its deadline (the sweeper has not cancelled it yet): answered without the
    // voucher's lock, which the worker needs.
    if before.pay_deadline.timestamp_millis() <= now_ms {
        return Ok(Payment::Expired);
    }
    let mut tx = db.begin().await?;
    vouchers::lock(&mut tx, before.voucher_id).await?;
    // The clock read again with the lock held: the wait for it (the worker's batch, a
    // rebuild, SQLite's one writer) may have outlasted the deadline (a review,
    // 2026-12-02: such an order was paid after it).
    let now_ms = db_clock::now_ms_on(&mut tx).await?;
    let paid: Option<i64> = sqlx::query_scalar(
        "UPDATE orders SET status = 'paid', paid_at = $1 \
         WHERE id = $2 AND user_id = $3 AND status = 'unpaid' AND pay_deadline > $4 RETURNING voucher_id",
    )
    .bind(now_ms)
    .bind(order_id)
    .bind(user_id)
    .bind(now_ms)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(voucher_id) = paid {
        sqlx::query("UPDATE vouchers SET paid = paid + 1 WHERE id = $1").bind(voucher_id).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    if paid.is_some() {
        metrics::counter!("seckill_orders_paid_total").increment(1);
    }
    let Some(order) = get_for_user(db, order_id, user_id).await? else { return Ok(Payment::NotFound) };
    Ok(payment(order))
}

/// What a payment answers of the order as it is after it.
fn payment(order: Order) -> Payment {
    match (order.status, order.cancel_reason) {
        (OrderStatus::Paid, _) => Payment::Paid(order),
        (OrderStatus::Cancelled, Some(CancelReason::Timeout)) | (OrderStatus::Unpaid, _) => Payment::Expired,
        (OrderStatus::Cancelled, _) => Payment::Cancelled,
    }
}

/// The shopper cancels their unpaid order. As with [`pay`], an order that is not theirs,
/// or not unpaid, takes no write lock.
pub async fn cancel_by_shopper(db: &Db, order_id: i64, user_id: i64, now_ms: i64) -> sqlx::Result<Cancel> {
    let Some(order) = get_for_user(db, order_id, user_id).await? else { return Ok(Cancel::NotFound) };
    match order.status {
        OrderStatus::Paid => return Ok(Cancel::Paid),
        OrderStatus::Cancelled => return Ok(Cancel::Already(order)),
        OrderStatus::Unpaid => {}
    }
    // Past its deadline (the sweeper has not come yet), the order lapsed: it is
    // cancelled as the sweeper would, and is not one of the shopper's own cancels.
    let reason =
        if order.pay_deadline.timestamp_millis() <= now_ms { CancelReason::Timeout } else { CancelReason::Shopper };
    // A shopper holds one unpaid order of a sale at a time (`orders_one_per_user`), so
    // no two cancels of theirs race past the count.
    if reason == CancelReason::Shopper && shopper_cancels(db, user_id, order.voucher_id).await? >= MOST_SHOPPER_CANCELS
    {
        return Ok(Cancel::Limit);
    }
    let owed = cancel(db, (order_id, order.voucher_id), Some(user_id), reason, now_ms).await?;
    let Some(order) = get_for_user(db, order_id, user_id).await? else { return Ok(Cancel::NotFound) };
    Ok(match (owed, order.status) {
        (Some(owed), _) => Cancel::Cancelled(order, owed),
        (None, OrderStatus::Paid) => Cancel::Paid,
        (None, _) => Cancel::Already(order),
    })
}

/// How many of the sale's orders the shopper cancelled themselves.
async fn shopper_cancels(db: &Db, user_id: i64, voucher_id: i64) -> sqlx::Result<i64> {
    sqlx::query_scalar("SELECT COUNT(*) FROM orders WHERE user_id = $1 AND voucher_id = $2 AND cancel_reason = $3")
        .bind(user_id)
        .bind(voucher_id)
        .bind(CancelReason::Shopper.as_str())
        .fetch_one(db)
        .await
}

/// Cancels an unpaid order (`(order id, its voucher's id)`; of `user_id` when given):
/// status, the voucher's stock and the give-back Redis owes, in one transaction.
/// `None` when it was not unpaid.
pub async fn cancel(
    db: &Db,
    (order_id, voucher_id): (i64, i64),
    user_id: Option<i64>,
    reason: CancelReason,
    now_ms: i64,
) -> sqlx::Result<Option<Owed>> {
    let mut tx = db.begin().await?;
    vouchers::lock(&mut tx, voucher_id).await?;
    let owed: Option<Owed> = sqlx::query_as(
        "UPDATE orders SET status = 'cancelled', cancelled_at = $1, cancel_reason = $2 \
         WHERE id = $3 AND status = 'unpaid' AND ($4 IS NULL OR user_id = $4) \
         RETURNING id AS order_id, voucher_id, user_id",
    )
    .bind(now_ms)
    .bind(reason.as_str())
    .bind(order_id)
    .bind(user_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(owed) = owed else { return Ok(None) };
    give_back_in_db(&mut tx, &owed, now_ms).await?;
    tx.commit().await?;
    metrics::counter!("seckill_orders_cancelled_total", "reason" => reason.as_str()).increment(1);
    Ok(Some(owed))
}

async fn give_back_in_db(tx: &mut Tx<'_>, owed: &Owed, now_ms: i64) -> sqlx::Result<()> {
    sqlx::query("UPDATE vouchers SET stock_left = stock_left + 1, cancelled = cancelled + 1 WHERE id = $1")
        .bind(owed.voucher_id)
        .execute(&mut **tx)
        .await?;
    sqlx::query("INSERT INTO restocks_owed (order_id, voucher_id, user_id, created_at) VALUES ($1, $2, $3, $4)")
        .bind(owed.order_id)
        .bind(owed.voucher_id)
        .bind(owed.user_id)
        .bind(now_ms)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Unpaid orders whose deadline is at or before `now_ms`, oldest deadline first: each
/// `(order id, its voucher's id)`.
pub async fn overdue(db: &Db, now_ms: i64, limit: i64) -> sqlx::Result<Vec<(i64, i64)>> {
    sqlx::query_as(
        "SELECT id, voucher_id FROM orders WHERE status = 'unpaid' AND pay_deadline <= $1 ORDER BY pay_deadline LIMIT $2",
    )
    .bind(now_ms)
    .bind(limit)
    .fetch_all(db)
    .await
}

/// Give-backs Redis has owed since before `before_ms`: their canceller died or failed
/// between the database and Redis. By order id from past `after`, at most `limit`.
pub async fn owed(db: &Db, before_ms: i64, (after, limit): (i64, i64)) -> sqlx::Result<Vec<Owed>> {
    sqlx::query_as(
        "SELECT order_id, voucher_id, user_id FROM restocks_owed WHERE created_at <= $1 AND order_id > $2 \
         ORDER BY order_id LIMIT $3",
    )
    .bind(before_ms)
    .bind(after)
    .bind(limit)
    .fetch_all(db)
    .await
}

/// Redis has done the give-back.
pub async fn settled(db: &Db, order_id: i64) -> sqlx::Result<()> {
    sqlx::query("DELETE FROM restocks_owed WHERE order_id = $1").bind(order_id).execute(db).await?;
    Ok(())
}
