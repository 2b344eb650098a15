//! The report's SQL: counts added by each process's tally, and the sale's figures read
//! from the orders, dead letters and the counts.

use super::{latency_bound, OrderCounts, Outcome, LATENCY_BOUNDS_US};
use crate::{backend::Db, order_ids::EPOCH_SECS, orders::FailReason};
use sqlx::AnyConnection;
use std::collections::{BTreeMap, HashMap};

/// What the database knows of a sale's grabs and orders, read at one moment.
pub struct Record {
    /// Grabs per Unix second and outcome.
    pub seconds: BTreeMap<i64, BTreeMap<Outcome, i64>>,
    /// Grabs the gate decided per latency bin (index in [`LATENCY_BOUNDS_US`]).
    pub latency: [i64; LATENCY_BOUNDS_US.len()],
    pub orders: OrderCounts,
    /// Dead letters: the worker's (`dead_letters`) and the grants Redis lost (`lost`).
    pub dead_letters: i64,
    pub lost: i64,
}

/// Reads the sale's record in one read transaction, so its figures agree with each
/// other while the worker saves orders (on PostgreSQL one snapshot for every query:
/// repeatable read; SQLite's read transaction is one already).
pub async fn read(db: &Db, voucher_id: i64) -> sqlx::Result<Record> {
    let mut tx = db.begin().await?;
    if tx.backend_name() == "PostgreSQL" {
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ").execute(&mut *tx).await?;
    }
    let seconds = answers_per_second(&mut tx, voucher_id).await?;
    let latency = latency(&mut tx, voucher_id).await?;
    let orders = orders(&mut tx, voucher_id).await?;
    let (dead_letters, lost): (i64, i64) = sqlx::query_as(
        "SELECT COALESCE(SUM(CASE WHEN reason = $2 THEN 0 ELSE 1 END), 0),                 COALESCE(SUM(CASE WHEN reason = $2 THEN 1 ELSE 0 END), 0)          FROM dead_letters WHERE voucher_id = $1",
    )
    .bind(voucher_id)
    .bind(FailReason::Lost.as_str())
    .fetch_one(&mut *tx)
    .await?;
    tx.rollback().await?;
    Ok(Record { seconds, latency, orders, dead_letters, lost })
}

/// The windows (`begins_at`, `ends_at`, Unix ms) of those of `ids` that are sales.
pub async fn windows(db: &Db, ids: &[i64]) -> sqlx::Result<std::collections::HashMap<i64, (i64, i64)>> {
    let mut found = std::collections::HashMap::new();
    // A few hundred at a time: far below any engine's limit on bound values.
    for chunk in ids.chunks(500) {
        let marks: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
        let sql = format!("SELECT id, begins_at, ends_at FROM vouchers WHERE id IN ({})", marks.join(", "));
        let mut query = sqlx::query_as::<_, (i64, i64, i64)>(&sql);
        for id in chunk {
            query = query.bind(*id);
        }
        found.extend(query.fetch_all(db).await?.into_iter().map(|(id, b, e)| (id, (b, e))));
    }
    Ok(found)
}

/// Refusals by (voucher, Unix second, outcome).
pub type Refusals = HashMap<(i64, i64, Outcome), i64>;
/// Grabs the gate decided by (voucher, latency bin).
pub type Latencies = HashMap<(i64, usize), i64>;

/// Adds a tally's counts, in one transaction. Counts of a voucher that does not exist
/// (a grab may name any id) are dropped.
pub async fn add_counts(db: &Db, refusals: &Refusals, latency: &Latencies) -> sqlx::Result<()> {
    // In key order: two processes flushing the same rows at once lock them in the same
    // order (PostgreSQL would otherwise find a deadlock and refuse one).
    let mut refusals: Vec<_> = refusals.iter().collect();
    refusals.sort_unstable_by_key(|(k, _)| **k);
    let mut latency: Vec<_> = latency.iter().collect();
    latency.sort_unstable_by_key(|(k, _)| **k);
    let mut tx = db.begin().await?;
    for (&(voucher_id, second, outcome), &n) in refusals {
        sqlx::query(
            "INSERT INTO sale_refusals (voucher_id, second, code, n) \
             SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM vouchers WHERE id = $1) \
             ON CONFLICT (voucher_id, second, code) DO UPDATE SET n = sale_refusals.n + excluded.n",
        )
        .bind(voucher_id)
        .bind(second)
        .bind(outcome.as_str())
        .bind(n)
        .execute(&mut *tx)
        .await?;
    }
    for (&(voucher_id, bin), &n) in latency {
        sqlx::query(
            "INSERT INTO sale_latency (voucher_id, le_us, n) \
             SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM vouchers WHERE id = $1) \
             ON CONFLICT (voucher_id, le_us) DO UPDATE SET n = sale_latency.n + excluded.n",
        )
        .bind(voucher_id)
        .bind(latency_bound(bin))
        .bind(n)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await
}

/// Grabs per Unix second and outcome: grants from the orders and dead letters (by the
/// second their id carries), refusals from the counts.
async fn answers_per_second(
    db: &mut AnyConnection,
    voucher_id: i64,
) -> sqlx::Result<BTreeMap<i64, BTreeMap<Outcome, i64>>> {
    let granted: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT s, CAST(SUM(n) AS BIGINT) FROM ( \
           SELECT (id >> 32) AS s, COUNT(*) AS n FROM orders WHERE voucher_id = $1 GROUP BY 1 \
           UNION ALL \
           SELECT (order_id >> 32) AS s, COUNT(*) AS n FROM dead_letters WHERE voucher_id = $1 GROUP BY 1 \
           UNION ALL \
           SELECT (u.order_id >> 32) AS s, COUNT(*) AS n FROM unsaved_grants u WHERE u.voucher_id = $1 \
             AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = u.order_id) \
             AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.order_id = u.order_id) GROUP BY 1 \
         ) AS g GROUP BY s",
    )
    .bind(voucher_id)
    .fetch_all(&mut *db)
    .await?;
    let refused: Vec<(i64, String, i64)> =
        sqlx::query_as("SELECT second, code, n FROM sale_refusals WHERE voucher_id = $1")
            .bind(voucher_id)
            .fetch_all(&mut *db)
            .await?;
    let mut seconds: BTreeMap<i64, BTreeMap<Outcome, i64>> = BTreeMap::new();
    for (s, n) in granted {
        *seconds.entry(s + EPOCH_SECS).or_default().entry(Outcome::Granted).or_default() += n;
    }
    for (second, code, n) in refused {
        if let Some(outcome) = Outcome::parse(&code) {
            *seconds.entry(second).or_default().entry(outcome).or_default() += n;
        }
    }
    Ok(seconds)
}

/// Grabs the gate decided per latency bin (index in [`LATENCY_BOUNDS_US`]).
async fn latency(db: &mut AnyConnection, voucher_id: i64) -> sqlx::Result<[i64; LATENCY_BOUNDS_US.len()]> {
    let rows: Vec<(i64, i64)> = sqlx::query_as("SELECT le_us, n FROM sale_latency WHERE voucher_id = $1")
        .bind(voucher_id)
        .fetch_all(&mut *db)
        .await?;
    let mut counts = [0; LATENCY_BOUNDS_US.len()];
    for (le_us, n) in rows {
        if let Some(i) = LATENCY_BOUNDS_US.iter().position(|&b| b == le_us) {
            counts[i] += n;
        }
    }
    Ok(counts)
}

/// The sale's orders by status and cancel reason.
async fn orders(db: &mut AnyConnection, voucher_id: i64) -> sqlx::Result<OrderCounts> {
    let rows: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT status, COALESCE(cancel_reason, ''), COUNT(*) FROM orders WHERE voucher_id = $1 \
         GROUP BY status, cancel_reason",
    )
    .bind(voucher_id)
    .fetch_all(&mut *db)
    .await?;
    let mut counts = OrderCounts::default();
    for (status, reason, n) in rows {
        counts.total += n;
        match (status.as_str(), reason.as_str()) {
            ("unpaid", _) => counts.unpaid += n,
            ("paid", _) => counts.paid += n,
            (_, "timeout") => counts.timed_out += n,
            _ => counts.cancelled_by_shopper += n,
        }
    }
    Ok(counts)
}
