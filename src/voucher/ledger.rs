//! The stock-change ledger in SQL: every change of a sale's stock an operator made
//! (or half of a move of units between its buckets, `sale::refill`), written under the
//! voucher's lock with what Redis now owes, and settled once Redis made it
//! (`sale::stock`).

use super::store::{lock, VoucherRow, COLUMNS};
use super::MOST_STOCK_CHANGES;
use crate::backend::{layout::share, Db};
use sqlx::FromRow;

/// A stock change, as its row holds it: an operator's, in one bucket of the sale, or
/// one half of a move of units between buckets (`sale::refill`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromRow)]
pub struct StockChange {
    pub id: i64,
    pub voucher_id: i64,
    /// More than 0 adds, less than 0 withdraws.
    pub units: i64,
    /// The bucket of the sale it is made in (0 for a sale of one shard).
    pub bucket: i64,
    /// A move's withdrawal: the bucket its units go to.
    pub move_to: Option<i64>,
    /// A move's addition: the bucket its units came from.
    pub move_from: Option<i64>,
}

impl StockChange {
    /// One half of a move: it leaves the voucher's totals alone.
    pub fn is_move(&self) -> bool {
        self.move_to.is_some() || self.move_from.is_some()
    }

    /// The bucket it is made in.
    pub fn bucket(&self) -> u32 {
        u32::try_from(self.bucket).unwrap_or(0)
    }
}

const CHANGE_COLUMNS: &str = "id, voucher_id, units, bucket, move_to, move_from";

/// Where a change goes: its bucket, and for half of a move, the other bucket.
#[derive(Clone, Copy, Debug, Default)]
struct Owing {
    bucket: i64,
    move_to: Option<i64>,
    move_from: Option<i64>,
}

/// Why the ledger wrote nothing for an operator's change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The addition would take the sale past its largest stock (or there is no such
    /// voucher).
    StockCap,
    /// The sale has had [`MOST_STOCK_CHANGES`] changes already.
    ChangeCap,
}

/// Adds units to the database's stock, with the changes Redis now owes, one per
/// bucket of the sale that gets a share (one transaction).
pub async fn add_stock(
    db: &Db,
    voucher_id: i64,
    units: i64,
    max_stock: i64,
) -> sqlx::Result<Result<(Vec<StockChange>, VoucherRow), Refused>> {
    let mut tx = db.begin().await?;
    // The cap is checked in the same statement: two additions at once cannot both pass it.
    let sql = format!(
        "UPDATE vouchers SET stock = stock + $2, stock_left = stock_left + $2, added = added + $2, \
         version = version + 1 WHERE id = $1 AND stock + $2 <= $3 RETURNING {COLUMNS}"
    );
    let query = sqlx::query_as(&sql).bind(voucher_id).bind(units).bind(max_stock);
    let row: Option<VoucherRow> = query.fetch_optional(&mut *tx).await?;
    let Some(row) = row else { return Ok(Err(Refused::StockCap)) };
    // Counted under the row's lock that statement took: calls at once each see the
    // others' rows.
    if operator_changes(&mut *tx, voucher_id).await? >= MOST_STOCK_CHANGES {
        return Ok(Err(Refused::ChangeCap));
    }
    let mut changes = Vec::new();
    for bucket in row.buckets() {
        let part = share(units, row.shards(), bucket);
        if part > 0 {
            changes.push(owe(&mut tx, voucher_id, part, Owing { bucket: bucket.into(), ..Owing::default() }).await?);
        }
    }
    tx.commit().await?;
    Ok(Ok((changes, row)))
}

/// Writes a withdrawal Redis now owes, from the sale's bucket 0 (a sale of several
/// shards gathers the units there first): the database's stock changes once Redis
/// has said how many units it took ([`settle_change`]).
/// [`Refused::ChangeCap`] is its one refusal, checked under the voucher's lock.
pub async fn owe_withdrawal(db: &Db, voucher_id: i64, units: i64) -> sqlx::Result<Result<StockChange, Refused>> {
    let mut tx = db.begin().await?;
    lock(&mut tx, voucher_id).await?;
    if operator_changes(&mut *tx, voucher_id).await? >= MOST_STOCK_CHANGES {
        return Ok(Err(Refused::ChangeCap));
    }
    let change = owe(&mut tx, voucher_id, -units, Owing::default()).await?;
    tx.commit().await?;
    Ok(Ok(change))
}

/// Writes a move Redis now owes: `units` out of bucket `from`, bound for bucket `to`.
/// Its addition is written when the withdrawal is settled ([`settle_change`]).
pub async fn owe_move(db: &Db, voucher_id: i64, (from, to): (u32, u32), units: i64) -> sqlx::Result<StockChange> {
    let mut tx = db.begin().await?;
    let owing = Owing { bucket: from.into(), move_to: Some(to.into()), move_from: None };
    let change = owe(&mut tx, voucher_id, -units, owing).await?;
    tx.commit().await?;
    Ok(change)
}

/// Writes a change Redis now owes, under the voucher's lock ([`lock`](super::store::lock)).
/// Dated by the database's clock, as the upkeep that finds it abandoned reads it
/// (`sale::stock::finish_owed`): a process whose clock ran fast must not hide its
/// change from the others' upkeep for as long as its clock is ahead.
async fn owe(tx: &mut crate::backend::Tx<'_>, voucher_id: i64, units: i64, to: Owing) -> sqlx::Result<StockChange> {
    lock(tx, voucher_id).await?;
    let now = crate::backend::db_clock::now_ms_on(tx).await?;
    let sql = format!(
        "INSERT INTO stock_changes (voucher_id, units, created_at, bucket, move_to, move_from) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING {CHANGE_COLUMNS}"
    );
    sqlx::query_as(&sql)
        .bind(voucher_id)
        .bind(units)
        .bind(now)
        .bind(to.bucket)
        .bind(to.move_to)
        .bind(to.move_from)
        .fetch_one(&mut **tx)
        .await
}

/// What the database records of a change once settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settled {
    /// Units it made: what Redis answered, or what was recorded before.
    pub made: i64,
    /// A move's withdrawal settled now: the addition its units now owe their target.
    pub then: Option<StockChange>,
}

/// Records what Redis made of a change (`made` units, as `lua/stock.lua` answered),
/// once: an operator's withdrawal takes its units off the database's stock then, a
/// move's writes the addition it owes its target bucket, in the same transaction.
/// Returns what the database holds as made: `made`, or what was recorded before (by
/// the upkeep, or voided by a rebuild of the bucket).
pub async fn settle_change(db: &Db, change: &StockChange, made: i64) -> sqlx::Result<Settled> {
    let mut tx = db.begin().await?;
    // First: a rebuild of the bucket holds it from its snapshot until Redis holds that.
    lock(&mut tx, change.voucher_id).await?;
    let settled = sqlx::query("UPDATE stock_changes SET applied = $2 WHERE id = $1 AND applied IS NULL")
        .bind(change.id)
        .bind(made)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if settled == 0 {
        let recorded: Option<i64> = sqlx::query_scalar("SELECT applied FROM stock_changes WHERE id = $1")
            .bind(change.id)
            .fetch_one(&mut *tx)
            .await?;
        tx.rollback().await?;
        return Ok(Settled { made: recorded.unwrap_or(0), then: None });
    }
    let mut then = None;
    if let (Some(to), true) = (change.move_to, made < 0) {
        let owing = Owing { bucket: to, move_to: None, move_from: Some(change.bucket) };
        then = Some(owe(&mut tx, change.voucher_id, -made, owing).await?);
    } else if made < 0 && !change.is_move() {
        let taken = withdrawable(&mut tx, change, made).await?;
        sqlx::query(
            "UPDATE vouchers SET stock = stock + $2, stock_left = stock_left + $2, withdrawn = withdrawn - $2, \
             version = version + 1 WHERE id = $1",
        )
        .bind(change.voucher_id)
        .bind(taken)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(Settled { made, then })
}

/// What of a withdrawal Redis made (`made` < 0) the database can take: at most its
/// units left. Redis caps a withdrawal by its own count; had Redis come to count more
/// than the database (a failover that lost writes), the whole of it would break
/// `stock_left >= 0`, and the change would stay owed for good, retried every upkeep
/// round (on a sale of several shards, holding up every move and sell-out). The
/// units Redis counted beyond the database's were never there: they are gone now.
async fn withdrawable(tx: &mut crate::backend::Tx<'_>, change: &StockChange, made: i64) -> sqlx::Result<i64> {
    let left: i64 = sqlx::query_scalar("SELECT stock_left FROM vouchers WHERE id = $1")
        .bind(change.voucher_id)
        .fetch_one(&mut **tx)
        .await?;
    let taken = made.max(-left);
    if taken != made {
        tracing::warn!(
            voucher_id = change.voucher_id,
            change = change.id,
            redis = -made,
            database = -taken,
            "a withdrawal took more units in Redis than the database had left: Redis counted more than the database"
        );
    }
    Ok(taken)
}

/// How many of `voucher_id`'s stock changes Redis still owes, and the newest change's
/// id: read before and after a reading of a sale's buckets, equal and nothing owed,
/// no move was under way while it was read (each is owed from before its units leave
/// a bucket until they are in the other).
pub async fn changes_mark(db: &Db, voucher_id: i64) -> sqlx::Result<(i64, i64)> {
    sqlx::query_as("SELECT COUNT(*) - COUNT(applied), COALESCE(MAX(id), 0) FROM stock_changes WHERE voucher_id = $1")
        .bind(voucher_id)
        .fetch_one(db)
        .await
}

/// Stock changes operators made to `voucher_id`: each addition's share of a bucket and
/// each withdrawal, made or refused (moves between buckets are the sale's own). What
/// [`MOST_STOCK_CHANGES`] bounds.
pub async fn operator_changes<'c>(
    db: impl sqlx::Executor<'c, Database = sqlx::Any>,
    voucher_id: i64,
) -> sqlx::Result<i64> {
    let sql = "SELECT COUNT(*) FROM stock_changes WHERE voucher_id = $1 AND move_to IS NULL AND move_from IS NULL";
    sqlx::query_scalar(sql).bind(voucher_id).fetch_one(db).await
}

/// Stock changes of `voucher_id` Redis still owes, whatever their age: units a sale
/// of several shards has not sold though no bucket shows them yet.
pub async fn owed_changes_of(db: &Db, voucher_id: i64) -> sqlx::Result<Vec<StockChange>> {
    let sql =
        format!("SELECT {CHANGE_COLUMNS} FROM stock_changes WHERE voucher_id = $1 AND applied IS NULL ORDER BY id");
    sqlx::query_as(&sql).bind(voucher_id).fetch_all(db).await
}

/// Stock changes Redis has owed since before `before` (Unix ms): their caller died or
/// could not reach Redis. Oldest first from past the id `after`, at most `limit`.
pub async fn owed_changes(db: &Db, before: i64, after: i64, limit: i64) -> sqlx::Result<Vec<StockChange>> {
    let sql = format!(
        "SELECT {CHANGE_COLUMNS} FROM stock_changes WHERE applied IS NULL AND created_at < $1 AND id > $2 \
         ORDER BY id LIMIT $3"
    );
    sqlx::query_as(&sql).bind(before).bind(after).bind(limit).fetch_all(db).await
}
