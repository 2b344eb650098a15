//! The snapshot a rebuild of a sale in Redis starts from (`sale::warm`): read under
//! the lock persisting takes, so no order of the voucher commits while Redis is loaded
//! from it.

use super::OrderStatus;
use crate::{
    backend::{
        layout::{bucket_of, share},
        Tx,
    },
    voucher::store::lock as lock_voucher,
};

/// What a rebuild of a voucher in Redis starts from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RebuildSource {
    /// Units the database has not sold.
    pub stock_left: i64,
    /// Users holding a (not cancelled) order for the voucher, each with that order.
    pub buyers: Vec<(i64, i64)>,
    /// Cancelled orders: their units are in `stock_left` already.
    pub given_back: Vec<i64>,
    /// Every stored order (cancelled ones too) and its shopper: the rebuilt Redis
    /// holds their results, which is how it tells them from orders granted before
    /// it lost the voucher and committed after this snapshot (`lua/settle.lua`).
    pub orders: Vec<(i64, i64)>,
    /// Every stock change of the voucher (id, units it made), so the rebuilt Redis
    /// makes none of them again: those recorded; additions `stock_left` counts that
    /// Redis may not have been told of; and withdrawals Redis had not yet recorded
    /// here, which the rebuild voids (made 0: `stock_left` still counts their units).
    pub changes: Vec<(i64, i64)>,
}

/// Takes the write lock persisting takes (the voucher's row: SQLite's one writer,
/// PostgreSQL's row lock), then reads stock and buyers in one statement, so they agree
/// and no order of the voucher commits until the transaction ends; voids the stock
/// withdrawals not yet recorded (the caller commits that once Redis holds the
/// snapshot). All of it for one bucket of the sale (`bucket` of `shards`): its
/// shoppers' orders, its stock changes, and its units left. `None`: no such voucher.
///
/// A sale of one shard has the voucher's `stock_left`. A bucket's count is not kept
/// (units move between buckets in Redis), so it is worked out from what is: its share
/// of the units the voucher was made with, what its stock changes made (operators'
/// and moves'), less its shoppers' orders not cancelled. Summed over the buckets that
/// is `stock_left`.
pub async fn lock_for_rebuild(
    tx: &mut Tx<'_>,
    voucher_id: i64,
    (bucket, shards): (u32, u32),
) -> sqlx::Result<Option<RebuildSource>> {
    lock_voucher(tx, voucher_id).await?;
    // Stock left and as made, then each order's id, user and status (NULLs for a
    // voucher without orders).
    type Row = (i64, i64, Option<i64>, Option<i64>, Option<String>);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT v.stock_left, v.stock - v.added + v.withdrawn, o.id, o.user_id, o.status FROM vouchers v \
         LEFT JOIN orders o ON o.voucher_id = v.id WHERE v.id = $1",
    )
    .bind(voucher_id)
    .fetch_all(&mut **tx)
    .await?;
    let Some(&(stock_left, made_with, ..)) = rows.first() else { return Ok(None) };
    let mut snapshot = RebuildSource { stock_left, ..RebuildSource::default() };
    for (_, _, order, user, status) in rows {
        let (Some(order), Some(user), Some(status)) = (order, user, status) else { continue };
        if bucket_of(user, shards) != bucket {
            continue;
        }
        snapshot.orders.push((order, user));
        if status == OrderStatus::Cancelled.as_str() {
            snapshot.given_back.push(order);
        } else {
            snapshot.buyers.push((user, order));
        }
    }
    sqlx::query(
        "UPDATE stock_changes SET applied = 0 WHERE voucher_id = $1 AND bucket = $2 AND applied IS NULL AND units < 0",
    )
    .bind(voucher_id)
    .bind(i64::from(bucket))
    .execute(&mut **tx)
    .await?;
    snapshot.changes =
        sqlx::query_as("SELECT id, COALESCE(applied, units) FROM stock_changes WHERE voucher_id = $1 AND bucket = $2")
            .bind(voucher_id)
            .bind(i64::from(bucket))
            .fetch_all(&mut **tx)
            .await?;
    if shards > 1 {
        let changed: i64 = snapshot.changes.iter().map(|(_, units)| units).sum();
        // Never below 0 (a unit the database refused a later grant for, `Fate::NoStock`,
        // may have been short in another bucket): the database's backstop keeps the
        // sale from selling more than it has either way.
        snapshot.stock_left = (share(made_with, shards, bucket) + changed - snapshot.buyers.len() as i64).max(0);
    }
    Ok(Some(snapshot))
}
