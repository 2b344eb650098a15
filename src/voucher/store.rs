//! Vouchers in SQL.

use super::NewVoucher;
use crate::backend::Db;
use chrono::{DateTime, Utc};
use sqlx::FromRow;

/// A voucher row. Times are Unix milliseconds.
#[derive(Clone, Debug, FromRow)]
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
}

impl VoucherRow {
    pub fn begins(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(self.begins_at).unwrap_or_default()
    }

    pub fn ends(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(self.ends_at).unwrap_or_default()
    }
}

const COLUMNS: &str = "id, title, stock, stock_left, begins_at, ends_at, paid, cancelled";

pub async fn insert(db: &Db, v: &NewVoucher) -> sqlx::Result<VoucherRow> {
    let sql = format!(
        "INSERT INTO vouchers (title, stock, stock_left, begins_at, ends_at, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING {COLUMNS}"
    );
    sqlx::query_as(&sql)
        .bind(&v.title)
        .bind(v.stock)
        .bind(v.stock)
        .bind(v.begins_at.timestamp_millis())
        .bind(v.ends_at.timestamp_millis())
        .bind(Utc::now().timestamp_millis())
        .fetch_one(db)
        .await
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
