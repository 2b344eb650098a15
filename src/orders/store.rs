//! Orders in SQL. Persisting is idempotent: a message delivered twice yields one order.

use super::{
    entry::OrderMsg,
    unsettled::{Locks, Watch},
    FailReason,
};
use crate::backend::{
    db_clock::{now_ms_postgres, now_ms_sqlite, POSTGRES},
    Db, Tx,
};
use crate::voucher::store::lock as lock_voucher;

/// What became of one message when the worker persisted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// The order is in the database (now, or already from an earlier delivery).
    Persisted,
    /// The shopper already holds another order for this voucher. The unit this grab
    /// took goes back; the buyer slot stays (it belongs to the other order).
    Duplicate,
    /// The database has no stock left for it (Redis was rebuilt with too much).
    /// The buyer slot goes back; the unit does not exist.
    NoStock,
    /// The order was dead-lettered (buried), now or before this delivery: it is not
    /// stored, and its give-back is finished if a crash left it undone.
    Buried,
}

impl Fate {
    /// What the shopper of an order of this fate is told; `None` for a persisted one.
    pub fn reason(self) -> Option<FailReason> {
        match self {
            Self::Persisted => None,
            Self::Duplicate => Some(FailReason::AlreadyBought),
            Self::NoStock => Some(FailReason::SoldOut),
            Self::Buried => Some(FailReason::DeadLetter),
        }
    }

    /// The reason an order of this fate is recorded unsaved for ([`unsaved_grant`]):
    /// one no row of the database records (a buried one is a dead letter there).
    fn unsaved_reason(self) -> Option<FailReason> {
        self.reason().filter(|_| self != Self::Buried)
    }

    /// The fate of an order recorded unsaved for `reason` ([`Self::unsaved_reason`]'s
    /// inverse).
    fn of_unsaved(reason: FailReason) -> Self {
        match reason {
            FailReason::SoldOut => Self::NoStock,
            _ => Self::Duplicate,
        }
    }
}

/// Persists a batch in one transaction: insert each order unless it is stored already,
/// buried, or its shopper holds another live order of the voucher, and take one unit
/// of database stock per inserted order. Each order must be paid within
/// `pay_timeout_ms` of its grab (the time in its id) or of its saving, whichever is
/// later, by the database's clock (`backend::db_clock`): an outage delays orders and
/// never costs the shopper their time to pay.
///
/// One insert and one stock update per voucher;
/// only when the database has less stock than Redis granted (Redis was rebuilt with
/// too much) does it go order by order, to say which ones found no stock.
///
/// The batch goes in first as if none of its orders could conflict ([`OnConflict::Fail`]):
/// on PostgreSQL, `ON CONFLICT DO NOTHING` inserts each row speculatively, a fifth of
/// what an order costs the database (`src/bin/bench/history.md`). A conflict means a redelivery or a shopper's
/// second order, both rare: the transaction is rolled back and the batch runs again,
/// skipping what conflicts (PostgreSQL's log shows the refused insert as an error).
pub async fn persist(db: &Db, batch: &[OrderMsg], pay_timeout_ms: i64) -> sqlx::Result<Vec<Fate>> {
    persist_watched(db, batch, pay_timeout_ms, None).await
}

/// [`persist`] for a worker: orders it may have read from a stream Redis has lost
/// since go on record in the same transaction, as `watch` says (`unsettled`).
pub async fn persist_watched(
    db: &Db,
    batch: &[OrderMsg],
    pay_timeout_ms: i64,
    mut watch: Option<&mut Watch>,
) -> sqlx::Result<Vec<Fate>> {
    match persist_batch(db, batch, pay_timeout_ms, OnConflict::Fail, watch.as_deref_mut()).await {
        Err(e) if is_conflict(&e) => persist_batch(db, batch, pay_timeout_ms, OnConflict::Skip, watch).await,
        done => done,
    }
}

/// What an insert does with a row that hits a unique key: an order stored already, or
/// a second live order of one shopper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OnConflict {
    /// Fails the statement (a unique violation).
    Fail,
    /// Skips the row.
    Skip,
}

/// True when the insert met a unique key: an order stored already, or a shopper's
/// second live order (the batch is then inserted again, skipping such rows).
fn is_conflict(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(d) if d.kind() == sqlx::error::ErrorKind::UniqueViolation)
}

/// [`persist`], with the batch's insert meeting conflicts as `on_conflict` says.
async fn persist_batch(
    db: &Db,
    batch: &[OrderMsg],
    pay_timeout_ms: i64,
    on_conflict: OnConflict,
    watch: Option<&mut Watch>,
) -> sqlx::Result<Vec<Fate>> {
    let mut tx = db.begin().await?;
    let locks = Locks::take(&mut tx, batch).await?;
    let vouchers: Vec<i64> = locks.vouchers().collect();
    // Orders of a voucher the insert did not take whole: a redelivery, a buried order,
    // a second order of one shopper (rare). Only they cost a query each, to say which.
    let mut unsure = std::collections::HashSet::new();
    for &voucher_id in &vouchers {
        let orders: Vec<&OrderMsg> = batch.iter().filter(|m| m.voucher_id == voucher_id).collect();
        let taken = insert_new(&mut tx, voucher_id, &orders, pay_timeout_ms, on_conflict).await?;
        if taken < orders.len() as u64 {
            unsure.extend(orders.iter().map(|m| m.order_id));
        }
        if taken > 0 && !take_stock(&mut tx, voucher_id, taken as i64).await? {
            tx.rollback().await?;
            return persist_one_by_one(db, batch, pay_timeout_ms, watch).await;
        }
    }
    let mut fates = Vec::with_capacity(batch.len());
    for m in batch {
        let fate = if unsure.contains(&m.order_id) { classify(&mut tx, m).await? } else { Fate::Persisted };
        fates.push(fate);
    }
    record_unsaved(&mut tx, batch, &fates).await?;
    commit(tx, (locks, watch), batch, &fates).await?;
    Ok(fates)
}

/// Commits a transaction of [`persist`]: first, with a `watch`, puts on record the
/// orders it may have read from a stream Redis lost since (`unsettled`).
async fn commit(
    mut tx: Tx<'_>,
    (locks, watch): (Locks, Option<&mut Watch>),
    batch: &[OrderMsg],
    fates: &[Fate],
) -> sqlx::Result<()> {
    let Some(watch) = watch else { return tx.commit().await };
    let persisted = batch.iter().zip(fates).filter(|(_, &fate)| fate == Fate::Persisted).map(|(m, _)| m);
    let records = watch.record(&mut tx, &locks, persisted).await?;
    tx.commit().await?;
    watch.committed(locks, records);
    Ok(())
}

/// Inserts the orders of one voucher not buried (and, with [`OnConflict::Skip`], not yet
/// stored and whose shopper holds no other live order: the two unique keys of `orders`);
/// returns how many it inserted. Not which: on SQLite each row a statement returns is
/// a hand-over between threads, and nearly always every order goes in (returning the
/// ids doubled the CPU of persisting an order).
///
/// The orders travel as one parameter, a JSON object from order id to shopper
/// ([`orders_json`]); the grab time comes from the id in SQL (ids carry their second
/// since the ids epoch), and the voucher and the time to pay are bound once. So the
/// statement has one text whatever the batch's size, and each connection prepares it
/// once. A `VALUES` row per order made a text per batch size, more than a
/// connection's statement cache holds, and SQLite, which looks each `$N` up by walking
/// a list, spent more on preparing and binding them than on inserting (`src/bin/bench/history.md`).
async fn insert_new(
    tx: &mut Tx<'_>,
    voucher_id: i64,
    orders: &[&OrderMsg],
    pay_timeout_ms: i64,
    on_conflict: OnConflict,
) -> sqlx::Result<u64> {
    let sql = match (tx.backend_name() == POSTGRES, on_conflict) {
        (true, OnConflict::Fail) => INSERT_POSTGRES,
        (true, OnConflict::Skip) => INSERT_POSTGRES_SKIPPING,
        (false, OnConflict::Fail) => INSERT_SQLITE,
        (false, OnConflict::Skip) => INSERT_SQLITE_SKIPPING,
    };
    let inserted = sqlx::query(sql)
        .bind(voucher_id)
        .bind(crate::order_ids::EPOCH_SECS)
        .bind(pay_timeout_ms)
        .bind(orders_json(orders))
        .execute(&mut **tx)
        .await?;
    Ok(inserted.rows_affected())
}

/// The insert of [`insert_new`], reading its rows from the JSON object in `$4`: the one
/// statement written per engine (each reads JSON with a function of its own) and per
/// [`OnConflict`] (`$tail`).
macro_rules! insert_from_json {
    ($members:literal, $user:literal, $price:literal, $greatest:literal, $now:expr, $tail:literal) => {
        concat!(
            "INSERT INTO orders (id, voucher_id, user_id, status, created_at, pay_deadline, price) \
             SELECT v.id, CAST($1 AS BIGINT), v.user_id, 'unpaid', ((v.id >> 32) + CAST($2 AS BIGINT)) * 1000, ",
            $greatest,
            "(((v.id >> 32) + CAST($2 AS BIGINT)) * 1000, ",
            $now,
            ") + CAST($3 AS BIGINT), \
             COALESCE(v.price, (SELECT price FROM vouchers WHERE id = CAST($1 AS BIGINT))) \
             FROM (SELECT CAST(j.key AS BIGINT) AS id, CAST(",
            $user,
            " AS BIGINT) AS user_id, CAST(",
            $price,
            " AS BIGINT) AS price FROM ",
            $members,
            " AS j) AS v \
             WHERE NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.order_id = v.id) \
             AND NOT EXISTS (SELECT 1 FROM unsaved_grants u WHERE u.order_id = v.id)",
            $tail
        )
    };
}
macro_rules! insert_sqlite {
    ($tail:literal) => {
        insert_from_json!("json_each($4)", "j.value ->> 0", "j.value ->> 1", "MAX", now_ms_sqlite!(), $tail)
    };
}
macro_rules! insert_postgres {
    ($tail:literal) => {
        insert_from_json!(
            "json_each(CAST($4 AS JSON))",
            "j.value ->> 0",
            "j.value ->> 1",
            "GREATEST",
            now_ms_postgres!(),
            $tail
        )
    };
}
const INSERT_SQLITE: &str = insert_sqlite!("");
const INSERT_SQLITE_SKIPPING: &str = insert_sqlite!(" ON CONFLICT DO NOTHING");
const INSERT_POSTGRES: &str = insert_postgres!("");
const INSERT_POSTGRES_SKIPPING: &str = insert_postgres!(" ON CONFLICT DO NOTHING");

/// `{"<order id>":[<shopper>,<price or null>],…}` in the batch's order: both engines give a JSON object's
/// members in the order written (PostgreSQL's `json`, unlike `jsonb`, keeps it), so of
/// two orders of one shopper the first goes in, as before.
fn orders_json(orders: &[&OrderMsg]) -> String {
    use std::fmt::Write;
    let mut json = String::with_capacity(2 + orders.len() * 32);
    json.push('{');
    for (i, m) in orders.iter().enumerate() {
        let comma = if i == 0 { "" } else { "," };
        // Writing to a String cannot fail.
        let _ = match m.price {
            Some(price) => write!(json, "{comma}\"{}\":[{},{price}]", m.order_id, m.user_id),
            None => write!(json, "{comma}\"{}\":[{},null]", m.order_id, m.user_id),
        };
    }
    json.push('}');
    json
}

/// Takes `units` of the voucher's database stock; false when it has fewer.
async fn take_stock(tx: &mut Tx<'_>, voucher_id: i64, units: i64) -> sqlx::Result<bool> {
    let took = sqlx::query("UPDATE vouchers SET stock_left = stock_left - $1 WHERE id = $2 AND stock_left >= $1")
        .bind(units)
        .bind(voucher_id)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    Ok(took == 1)
}

/// What became of an order after the inserts: stored (now or before), buried, ended
/// unsaved before (its fate as recorded), or refused because its shopper holds
/// another order.
async fn classify(tx: &mut Tx<'_>, m: &OrderMsg) -> sqlx::Result<Fate> {
    let stored: Option<i64> =
        sqlx::query_scalar("SELECT id FROM orders WHERE id = $1").bind(m.order_id).fetch_optional(&mut **tx).await?;
    if stored.is_some() {
        return Ok(Fate::Persisted);
    }
    if is_buried(&mut **tx, m.order_id).await? {
        return Ok(Fate::Buried);
    }
    Ok(unsaved_ending(&mut **tx, m).await?.map_or(Fate::Duplicate, Fate::of_unsaved))
}

/// Records, in the transaction that decided them, the orders of `batch` that will be
/// ended unsaved ([`unsaved_grant`]): so the decision is final.
async fn record_unsaved(tx: &mut Tx<'_>, batch: &[OrderMsg], fates: &[Fate]) -> sqlx::Result<()> {
    for (m, &fate) in batch.iter().zip(fates) {
        if let Some(reason) = fate.unsaved_reason() {
            unsaved_grant(&mut **tx, m, reason).await?;
        }
    }
    Ok(())
}

/// The slow path: each order in turn takes a unit, and those that find none are
/// removed again (`NoStock`).
async fn persist_one_by_one(
    db: &Db,
    batch: &[OrderMsg],
    pay_timeout_ms: i64,
    watch: Option<&mut Watch>,
) -> sqlx::Result<Vec<Fate>> {
    let mut tx = db.begin().await?;
    let locks = Locks::take(&mut tx, batch).await?;
    let mut fates = Vec::with_capacity(batch.len());
    for m in batch {
        let inserted = insert_new(&mut tx, m.voucher_id, &[m], pay_timeout_ms, OnConflict::Skip).await?;
        let fate = match inserted == 0 {
            true => classify(&mut tx, m).await?,
            false if take_stock(&mut tx, m.voucher_id, 1).await? => Fate::Persisted,
            false => {
                sqlx::query("DELETE FROM orders WHERE id = $1").bind(m.order_id).execute(&mut *tx).await?;
                Fate::NoStock
            }
        };
        fates.push(fate);
    }
    record_unsaved(&mut tx, batch, &fates).await?;
    commit(tx, (locks, watch), batch, &fates).await?;
    Ok(fates)
}

/// True when the database refused the data itself (a constraint: the order can never
/// be stored), not when it could not write at all (locked, full, read-only, down): only
/// the first may fail an order; the second only delays it.
pub fn refuses_data(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(d) if d.kind() != sqlx::error::ErrorKind::Other)
}

/// Burials of lost grabs per shopper and sale at most (a few more should several
/// answers race). A shopper's grant is lost only with Redis's data (a failover, a
/// restart without its file), and a shopper holds one grant at a time, so a handful
/// covers a sale day of failovers; ids a shopper makes up cannot grow the table past it.
const LOST_PER_SHOPPER: i64 = 8;

/// Buries an order Redis lost, as its shopper is told it was lost, unless it was
/// persisted: so a worker that read its entry before Redis lost it cannot save it
/// after that answer (persisting finds it buried), and "lost" stays the answer. Past
/// [`LOST_PER_SHOPPER`] burials of the shopper's in the sale, answers without one.
/// True when the order is persisted.
pub async fn bury_lost(db: &Db, m: &OrderMsg, reason: &str) -> sqlx::Result<bool> {
    // Asked again (the page polls): the burial made before needs no write.
    if is_buried(db, m.order_id).await? {
        return Ok(false);
    }
    let buried: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM dead_letters WHERE voucher_id = $1 AND user_id = $2 AND reason = $3")
            .bind(m.voucher_id)
            .bind(m.user_id)
            .bind(reason)
            .fetch_one(db)
            .await?;
    if buried < LOST_PER_SHOPPER {
        return Ok(bury(db, m, reason).await? == Fate::Persisted);
    }
    let found: Option<i64> =
        sqlx::query_scalar("SELECT id FROM orders WHERE id = $1").bind(m.order_id).fetch_optional(db).await?;
    Ok(found.is_some())
}

/// Buries an order (dead-letters it) unless it was persisted: one statement decides,
/// under the voucher's lock, so a dead letter racing a late persist of the same order
/// has one winner. [`Fate::Buried`] when buried now or by an earlier try,
/// [`Fate::Persisted`] when the order was persisted after all.
pub async fn bury(db: &Db, m: &OrderMsg, reason: &str) -> sqlx::Result<Fate> {
    let mut tx = db.begin().await?;
    lock_voucher(&mut tx, m.voucher_id).await?;
    sqlx::query(
        "INSERT INTO dead_letters (order_id, voucher_id, user_id, reason, created_at) \
         SELECT $1, $2, $3, $4, $5 WHERE NOT EXISTS (SELECT 1 FROM orders WHERE id = $6) \
         ON CONFLICT (order_id) DO NOTHING",
    )
    .bind(m.order_id)
    .bind(m.voucher_id)
    .bind(m.user_id)
    .bind(reason)
    .bind(chrono::Utc::now().timestamp_millis())
    .bind(m.order_id)
    .execute(&mut *tx)
    .await?;
    let buried = is_buried(&mut *tx, m.order_id).await?;
    tx.commit().await?;
    Ok(if buried { Fate::Buried } else { Fate::Persisted })
}

/// Why `m`'s order was buried, if it was: the reason it was buried with (one the
/// shopper is not told of reads as a dead letter).
pub async fn burial(db: &Db, m: &OrderMsg) -> sqlx::Result<Option<FailReason>> {
    let reason: Option<String> =
        sqlx::query_scalar("SELECT reason FROM dead_letters WHERE order_id = $1 AND user_id = $2 AND voucher_id = $3")
            .bind(m.order_id)
            .bind(m.user_id)
            .bind(m.voucher_id)
            .fetch_optional(db)
            .await?;
    Ok(reason.map(|r| FailReason::from_name(&r).unwrap_or(FailReason::DeadLetter)))
}

async fn is_buried<'e>(db: impl sqlx::any::AnyExecutor<'e>, order_id: i64) -> sqlx::Result<bool> {
    let found: Option<i64> = sqlx::query_scalar("SELECT order_id FROM dead_letters WHERE order_id = $1")
        .bind(order_id)
        .fetch_optional(db)
        .await?;
    Ok(found.is_some())
}

/// Records a grant that no order or dead letter records: persisting found its shopper
/// held another order of the sale, or no unit left, and the worker ends it unsaved
/// (`orders::fail`), the `reason` its shopper is told. Written in persisting's own
/// transaction, under the voucher's lock: a record is final, and no later delivery of
/// the entry (another worker that claimed it, a failover) saves the order after it
/// was ended so (a review, 2026-12-02: after the shopper's other order was cancelled,
/// one could be, its unit already given back). Its shopper was told "queued", so it
/// is one of the sale's granted answers, at the second its order id carries. Once per
/// order; the report leaves it out should an order or dead letter of its id turn up
/// (records from before they were final).
async fn unsaved_grant<'e>(db: impl sqlx::any::AnyExecutor<'e>, m: &OrderMsg, reason: FailReason) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO unsaved_grants (order_id, voucher_id, user_id, reason) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (order_id) DO NOTHING",
    )
    .bind(m.order_id)
    .bind(m.voucher_id)
    .bind(m.user_id)
    .bind(reason.as_str())
    .execute(db)
    .await?;
    Ok(())
}

/// Why `m`'s grant was ended unsaved ([`unsaved_grant`]), if it was, for its shopper
/// only: the answer stays after Redis forgets the result.
pub async fn unsaved_ending<'e>(db: impl sqlx::any::AnyExecutor<'e>, m: &OrderMsg) -> sqlx::Result<Option<FailReason>> {
    let reason: Option<Option<String>> = sqlx::query_scalar(
        "SELECT reason FROM unsaved_grants WHERE order_id = $1 AND user_id = $2 AND voucher_id = $3",
    )
    .bind(m.order_id)
    .bind(m.user_id)
    .bind(m.voucher_id)
    .fetch_optional(db)
    .await?;
    Ok(reason.flatten().and_then(|r| FailReason::from_name(&r)))
}
