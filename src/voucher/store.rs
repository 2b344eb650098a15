//! Vouchers in SQL.

use super::NewVoucher;
use crate::backend::{layout::share, Db};
use chrono::{DateTime, Utc};
use sqlx::FromRow;

/// A voucher row. Times are Unix milliseconds.
#[derive(Clone, Debug, Default, FromRow)]
pub struct VoucherRow {
    pub id: i64,
    pub title: String,
    pub stock: i64,
    pub stock_left: i64,
    pub begins_at: i64,
    pub ends_at: i64,
    /// Orders paid.
    pub paid: i64,
    /// Orders cancelled (their units are back in `stock_left`).
    pub cancelled: i64,
    /// What a shopper pays and what the voucher is worth, in minor units.
    pub price: i64,
    pub face_value: i64,
    /// 1 while paused.
    pub paused: i64,
    /// Bumped by every operator change (Redis's window carries it).
    pub version: i64,
    /// Units operators added and withdrew since it was created.
    pub added: i64,
    pub withdrawn: i64,
    /// 1 when grabs need a grab token, issued from the start (`sale::gate`).
    pub fair_start: i64,
    /// What grab tokens derive from; never leaves the server (nor the Redis window).
    pub start_secret: String,
    /// When the gate first sold the last unit (Unix ms), once the sampler copied it.
    pub sold_out_at: Option<i64>,
    /// Buckets its units are split over in Redis (1: the whole sale in one slot).
    pub shards: i64,
}

impl VoucherRow {
    /// The voucher as the API answers it, with `remaining` units left.
    pub fn to_voucher(&self, remaining: i64) -> super::Voucher {
        super::Voucher {
            id: self.id,
            title: self.title.clone(),
            stock: self.stock,
            remaining: remaining.max(0),
            begins_at: self.begins(),
            ends_at: self.ends(),
            price: self.price,
            face_value: self.face_value,
            currency: crate::money::currency().to_owned(),
            paused: self.is_paused(),
            fair_start: self.has_fair_start(),
            shards: self.shards(),
        }
    }

    /// Buckets of its sale in Redis, 1 to `MAX_SHARDS` (the database checks it).
    pub fn shards(&self) -> u32 {
        u32::try_from(self.shards).unwrap_or(1).clamp(1, crate::backend::layout::MAX_SHARDS)
    }

    /// Every bucket of its sale, 0 first.
    pub fn buckets(&self) -> std::ops::Range<u32> {
        0..self.shards()
    }

    /// Bucket `bucket` of its sale.
    pub fn bucket(&self, bucket: u32) -> crate::backend::layout::Bucket {
        crate::backend::layout::Bucket { voucher_id: self.id, shards: self.shards(), bucket }
    }

    pub fn begins(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(self.begins_at).unwrap_or_default()
    }

    pub fn ends(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(self.ends_at).unwrap_or_default()
    }

    pub fn is_paused(&self) -> bool {
        self.paused != 0
    }

    pub fn has_fair_start(&self) -> bool {
        self.fair_start != 0
    }
}

const COLUMNS: &str =
    "id, title, stock, stock_left, begins_at, ends_at, paid, cancelled, price, face_value, paused, version, added, \
     withdrawn, fair_start, start_secret, sold_out_at, shards";

pub async fn insert(db: &Db, v: &NewVoucher) -> sqlx::Result<VoucherRow> {
    let sql = format!(
        "INSERT INTO vouchers (title, stock, stock_left, begins_at, ends_at, created_at, price, face_value, \
         fair_start, start_secret, shards) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING {COLUMNS}"
    );
    sqlx::query_as(&sql)
        .bind(&v.title)
        .bind(v.stock)
        .bind(v.stock)
        .bind(v.begins_at.timestamp_millis())
        .bind(v.ends_at.timestamp_millis())
        .bind(Utc::now().timestamp_millis())
        .bind(v.price)
        .bind(v.face_value)
        .bind(i64::from(v.fair_start))
        .bind(new_secret())
        .bind(i64::from(v.shards))
        .fetch_one(db)
        .await
}

/// A fresh start secret: 128 random bits, as hex.
fn new_secret() -> String {
    format!("{:032x}", rand::random::<u128>())
}

pub async fn get(db: &Db, id: i64) -> sqlx::Result<Option<VoucherRow>> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM vouchers WHERE id = $1")).bind(id).fetch_optional(db).await
}

/// The newest vouchers first, at most `limit`.
pub async fn list(db: &Db, limit: i64) -> sqlx::Result<Vec<VoucherRow>> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM vouchers ORDER BY id DESC LIMIT $1")).bind(limit).fetch_all(db).await
}

/// Vouchers whose sale has not ended `grace_ms` ago: the ones to warm and to drain.
pub async fn live(db: &Db, grace_ms: i64) -> sqlx::Result<Vec<VoucherRow>> {
    let since = Utc::now().timestamp_millis() - grace_ms;
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM vouchers WHERE ends_at > $1 ORDER BY id"))
        .bind(since)
        .fetch_all(db)
        .await
}

/// Records when the gate first sold the last unit of `id` (the first record stands:
/// every process's sampler offers it).
pub async fn record_sold_out(db: &Db, id: i64, at_ms: i64) -> sqlx::Result<()> {
    sqlx::query("UPDATE vouchers SET sold_out_at = $1 WHERE id = $2 AND sold_out_at IS NULL")
        .bind(at_ms)
        .bind(id)
        .execute(db)
        .await?;
    Ok(())
}

/// A change of a voucher's own fields, checked (`sale::run`); `None` keeps a field.
#[derive(Clone, Debug, Default)]
pub struct Edit {
    pub title: Option<String>,
    pub price: Option<i64>,
    pub face_value: Option<i64>,
    pub begins_at: Option<i64>,
    pub ends_at: Option<i64>,
    pub paused: Option<bool>,
}

/// Applies `edit` if the row is still at `version` (what the checks were made on),
/// bumping it. `None`: no such voucher, or another change came first (check again).
pub async fn edit(db: &Db, id: i64, version: i64, edit: &Edit) -> sqlx::Result<Option<VoucherRow>> {
    let sql = format!(
        "UPDATE vouchers SET title = COALESCE($3, title), price = COALESCE($4, price), \
         face_value = COALESCE($5, face_value), begins_at = COALESCE($6, begins_at), \
         ends_at = COALESCE($7, ends_at), paused = COALESCE($8, paused), version = version + 1 \
         WHERE id = $1 AND version = $2 RETURNING {COLUMNS}"
    );
    sqlx::query_as(&sql)
        .bind(id)
        .bind(version)
        .bind(&edit.title)
        .bind(edit.price)
        .bind(edit.face_value)
        .bind(edit.begins_at)
        .bind(edit.ends_at)
        .bind(edit.paused.map(i64::from))
        .fetch_optional(db)
        .await
}

/// A stock change, as its row holds it: an operator's, in one bucket of the sale, or
/// one half of a move of units between buckets (`sale::shards`).
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

/// Adds units to the database's stock, with the changes Redis now owes, one per
/// bucket of the sale that gets a share (one transaction). `None`: no such voucher.
pub async fn add_stock(
    db: &Db,
    voucher_id: i64,
    units: i64,
    max_stock: i64,
) -> sqlx::Result<Option<(Vec<StockChange>, VoucherRow)>> {
    let mut tx = db.begin().await?;
    // The cap is checked in the same statement: two additions at once cannot both pass it.
    let sql = format!(
        "UPDATE vouchers SET stock = stock + $2, stock_left = stock_left + $2, added = added + $2, \
         version = version + 1 WHERE id = $1 AND stock + $2 <= $3 RETURNING {COLUMNS}"
    );
    let query = sqlx::query_as(&sql).bind(voucher_id).bind(units).bind(max_stock);
    let row: Option<VoucherRow> = query.fetch_optional(&mut *tx).await?;
    let Some(row) = row else { return Ok(None) };
    let mut changes = Vec::new();
    for bucket in row.buckets() {
        let part = share(units, row.shards(), bucket);
        if part > 0 {
            changes.push(owe(&mut tx, voucher_id, part, Owing { bucket: bucket.into(), ..Owing::default() }).await?);
        }
    }
    tx.commit().await?;
    Ok(Some((changes, row)))
}

/// Writes a withdrawal Redis now owes, from the sale's bucket 0 (a sale of several
/// shards gathers the units there first): the database's stock changes once Redis
/// has said how many units it took ([`settle_change`]).
pub async fn owe_withdrawal(db: &Db, voucher_id: i64, units: i64) -> sqlx::Result<StockChange> {
    let mut tx = db.begin().await?;
    let change = owe(&mut tx, voucher_id, -units, Owing::default()).await?;
    tx.commit().await?;
    Ok(change)
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

/// Takes the voucher's row lock for the rest of the transaction. Persisting, burying,
/// rebuilding a bucket and writing or settling a stock change take it first, so on
/// PostgreSQL (where readers do not wait for writers) each decides on what the other
/// committed: a rebuild's snapshot of a bucket's changes is never overtaken by a move
/// or a withdrawal written while it loads Redis. SQLite's single writer gives the same
/// order anyway.
pub async fn lock(tx: &mut crate::backend::Tx<'_>, voucher_id: i64) -> sqlx::Result<()> {
    sqlx::query("UPDATE vouchers SET stock_left = stock_left WHERE id = $1")
        .bind(voucher_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Writes a change Redis now owes, under the voucher's lock ([`lock`]).
async fn owe(tx: &mut crate::backend::Tx<'_>, voucher_id: i64, units: i64, to: Owing) -> sqlx::Result<StockChange> {
    lock(tx, voucher_id).await?;
    let sql = format!(
        "INSERT INTO stock_changes (voucher_id, units, created_at, bucket, move_to, move_from) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING {CHANGE_COLUMNS}"
    );
    sqlx::query_as(&sql)
        .bind(voucher_id)
        .bind(units)
        .bind(Utc::now().timestamp_millis())
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
        sqlx::query(
            "UPDATE vouchers SET stock = stock + $2, stock_left = stock_left + $2, withdrawn = withdrawn - $2, \
             version = version + 1 WHERE id = $1",
        )
        .bind(change.voucher_id)
        .bind(made)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(Settled { made, then })
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

/// Stock changes of `voucher_id` Redis still owes, whatever their age: units a sale
/// of several shards has not sold though no bucket shows them yet.
pub async fn owed_changes_of(db: &Db, voucher_id: i64) -> sqlx::Result<Vec<StockChange>> {
    let sql =
        format!("SELECT {CHANGE_COLUMNS} FROM stock_changes WHERE voucher_id = $1 AND applied IS NULL ORDER BY id");
    sqlx::query_as(&sql).bind(voucher_id).fetch_all(db).await
}

/// Stock changes Redis has owed since before `before` (Unix ms): their caller died or
/// could not reach Redis. Oldest first, at most `limit`.
pub async fn owed_changes(db: &Db, before: i64, limit: i64) -> sqlx::Result<Vec<StockChange>> {
    let sql = format!(
        "SELECT {CHANGE_COLUMNS} FROM stock_changes WHERE applied IS NULL AND created_at < $1 ORDER BY id LIMIT $2"
    );
    sqlx::query_as(&sql).bind(before).bind(limit).fetch_all(db).await
}
