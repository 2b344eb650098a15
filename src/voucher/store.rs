//! Vouchers in SQL.

use super::NewVoucher;
use crate::backend::Db;
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
        }
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
     withdrawn, fair_start, start_secret, sold_out_at";

pub async fn insert(db: &Db, v: &NewVoucher) -> sqlx::Result<VoucherRow> {
    let sql = format!(
        "INSERT INTO vouchers (title, stock, stock_left, begins_at, ends_at, created_at, price, face_value, \
         fair_start, start_secret) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING {COLUMNS}"
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

/// A stock change an operator asked for, as its row holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromRow)]
pub struct StockChange {
    pub id: i64,
    pub voucher_id: i64,
    /// More than 0 adds, less than 0 withdraws.
    pub units: i64,
}

/// Adds units to the database's stock, with the change Redis now owes (one
/// transaction). `None`: no such voucher.
pub async fn add_stock(
    db: &Db,
    voucher_id: i64,
    units: i64,
    max_stock: i64,
) -> sqlx::Result<Option<(StockChange, VoucherRow)>> {
    let mut tx = db.begin().await?;
    // The cap is checked in the same statement: two additions at once cannot both pass it.
    let sql = format!(
        "UPDATE vouchers SET stock = stock + $2, stock_left = stock_left + $2, added = added + $2, \
         version = version + 1 WHERE id = $1 AND stock + $2 <= $3 RETURNING {COLUMNS}"
    );
    let query = sqlx::query_as(&sql).bind(voucher_id).bind(units).bind(max_stock);
    let row: Option<VoucherRow> = query.fetch_optional(&mut *tx).await?;
    let Some(row) = row else { return Ok(None) };
    let change = owe(&mut tx, voucher_id, units).await?;
    tx.commit().await?;
    Ok(Some((change, row)))
}

/// Writes a withdrawal Redis now owes: the database's stock changes once Redis has
/// said how many units it took ([`settle_change`]).
pub async fn owe_withdrawal(db: &Db, voucher_id: i64, units: i64) -> sqlx::Result<StockChange> {
    let mut tx = db.begin().await?;
    let change = owe(&mut tx, voucher_id, -units).await?;
    tx.commit().await?;
    Ok(change)
}

async fn owe(tx: &mut crate::backend::Tx<'_>, voucher_id: i64, units: i64) -> sqlx::Result<StockChange> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO stock_changes (voucher_id, units, created_at) VALUES ($1, $2, $3) RETURNING id",
    )
    .bind(voucher_id)
    .bind(units)
    .bind(Utc::now().timestamp_millis())
    .fetch_one(&mut **tx)
    .await?;
    Ok(StockChange { id, voucher_id, units })
}

/// Records what Redis made of a change (`made` units, as `lua/stock.lua` answered),
/// once: a withdrawal takes its units off the database's stock then, in the same
/// transaction. Returns what the database holds as made: `made`, or what was
/// recorded before (by the upkeep, or voided by a rebuild of the voucher).
pub async fn settle_change(db: &Db, change: &StockChange, made: i64) -> sqlx::Result<i64> {
    let mut tx = db.begin().await?;
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
        return Ok(recorded.unwrap_or(0));
    }
    if made < 0 {
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
    Ok(made)
}

/// Stock changes Redis has owed since before `before` (Unix ms): their caller died or
/// could not reach Redis. Oldest first, at most `limit`.
pub async fn owed_changes(db: &Db, before: i64, limit: i64) -> sqlx::Result<Vec<StockChange>> {
    sqlx::query_as(
        "SELECT id, voucher_id, units FROM stock_changes WHERE applied IS NULL AND created_at < $1 ORDER BY id LIMIT $2",
    )
    .bind(before)
    .bind(limit)
    .fetch_all(db)
    .await
}
