//! Vouchers in SQL (their stock changes: `ledger`).

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

pub(super) const COLUMNS: &str =
    "id, title, stock, stock_left, begins_at, ends_at, paid, cancelled, price, face_value, paused, version, added, \
     withdrawn, fair_start, start_secret, sold_out_at, shards";

pub async fn insert(db: &Db, v: &NewVoucher) -> sqlx::Result<VoucherRow> {
    let sql = format!(
        "INSERT INTO vouchers (title, stock, stock_left, begins_at, ends_at, created_at, price, face_value, \
         fair_start, start_secret, shards) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING {COLUMNS}"
    );
    let query = sqlx::query_as(&sql)
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
        .bind(i64::from(v.shards));
    crate::backend::written(query.fetch_all(db)).await?.ok_or(sqlx::Error::RowNotFound)
}

/// A fresh start secret: 128 random bits, as hex.
fn new_secret() -> String {
    format!("{:032x}", rand::random::<u128>())
}

pub async fn get(db: &Db, id: i64) -> sqlx::Result<Option<VoucherRow>> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM vouchers WHERE id = $1")).bind(id).fetch_optional(db).await
}

/// The last voucher id the database handed out, whether or not its row is still there
/// (its count never goes back: SQLite's `AUTOINCREMENT`, PostgreSQL's identity
/// sequence), or the highest id stored if higher; 0 before the first.
pub async fn last_handed_out(db: &Db) -> sqlx::Result<i64> {
    let mut conn = db.acquire().await?;
    let (counted, greatest) = if conn.backend_name() == crate::backend::db_clock::POSTGRES {
        let sequence = "(SELECT last_value FROM pg_sequences \
                        WHERE format('%I.%I', schemaname, sequencename) = pg_get_serial_sequence('vouchers', 'id'))";
        (sequence, "GREATEST")
    } else {
        ("(SELECT seq FROM sqlite_sequence WHERE name = 'vouchers')", "MAX")
    };
    let sql = format!(
        "SELECT CAST({greatest}(COALESCE({counted}, 0), COALESCE((SELECT MAX(id) FROM vouchers), 0)) AS BIGINT)"
    );
    sqlx::query_scalar(&sql).fetch_one(&mut *conn).await
}

/// The newest vouchers first, older than `before` when given, at most `limit`.
pub async fn list(db: &Db, before: Option<i64>, limit: i64) -> sqlx::Result<Vec<VoucherRow>> {
    let sql = format!("SELECT {COLUMNS} FROM vouchers WHERE $1 IS NULL OR id < $1 ORDER BY id DESC LIMIT $2");
    sqlx::query_as(&sql).bind(before).bind(limit).fetch_all(db).await
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
    let query = sqlx::query_as(&sql)
        .bind(id)
        .bind(version)
        .bind(&edit.title)
        .bind(edit.price)
        .bind(edit.face_value)
        .bind(edit.begins_at)
        .bind(edit.ends_at)
        .bind(edit.paused.map(i64::from));
    crate::backend::written(query.fetch_all(db)).await
}

/// Takes the voucher's row lock for the rest of the transaction. Persisting, burying,
/// rebuilding a bucket and writing or settling a stock change take it first, so on
/// PostgreSQL (where readers do not wait for writers) each decides on what the other
/// committed: a rebuild's snapshot of a bucket's changes is never overtaken by a move
/// or a withdrawal written while it loads Redis. SQLite's single writer gives the same
/// order anyway.
pub async fn lock(tx: &mut crate::backend::Tx<'_>, voucher_id: i64) -> sqlx::Result<()> {
    lock_counting_rebuilds(tx, voucher_id).await.map(drop)
}

/// [`lock`], reading the count of the voucher's rebuilds as it takes it
/// (`orders::unsettled`): `None` when there is no such voucher. The one statement
/// that takes the lock.
pub async fn lock_counting_rebuilds(tx: &mut crate::backend::Tx<'_>, voucher_id: i64) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar("UPDATE vouchers SET stock_left = stock_left WHERE id = $1 RETURNING rebuilds")
        .bind(voucher_id)
        .fetch_optional(&mut **tx)
        .await
}

/// Counts a rebuild of the voucher's Redis, in the rebuild's transaction before its
/// snapshot (it takes the row's lock too): a worker whose transaction commits after
/// that snapshot reads the new count, and so learns its batch may be one the rebuild
/// never saw (`orders::unsettled`).
pub async fn count_rebuild(tx: &mut crate::backend::Tx<'_>, voucher_id: i64) -> sqlx::Result<()> {
    sqlx::query("UPDATE vouchers SET rebuilds = rebuilds + 1 WHERE id = $1")
        .bind(voucher_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
