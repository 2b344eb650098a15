//! Orders the database committed that Redis would never settle unless told: a
//! worker's batch read from a stream Redis then lost, and committed after the
//! rebuild's snapshot. The rebuild did not see them, and the rebuilt stream lacks
//! their entries, so nobody delivers them again. The worker settles them itself right
//! after the commit (`lua/settle.lua` takes their units and slots from the rebuilt
//! books); a worker killed in between would leave Redis counting their units unsold
//! and their shoppers' slots free for good. So such a batch goes on record in the
//! transaction that commits it, the worker strikes the record once Redis has settled
//! it, and the sweeper settles what a dead worker left ([`settle_abandoned`]).
//!
//! How a worker knows: every rebuild counts itself on its voucher's row in the
//! transaction of its snapshot (`voucher::store::count_rebuild`), and a worker's
//! transaction reads the count as it locks the row. Before it reads the stream, the
//! worker notes the count its last commit read ([`Watch::reads_begin`]): a commit that
//! reads another (or a worker that has read none yet: it just started) may hold
//! entries a rebuild since has not seen. Every commit of what was read since is
//! compared with that note, however many there are (a batch, then each entry worn by
//! redeliveries, or each in turn when the batch failed). Nearly every batch finds the
//! count noted, and writes nothing more.

use super::{entry::OrderMsg, settle::settle};
use crate::{
    backend::{
        db_clock::{now_ms_postgres, now_ms_sqlite, POSTGRES},
        layout::{bucket_of, expires_at},
        Backend, BackendError, Db, Tx,
    },
    voucher::store::{self as vouchers, lock_counting_rebuilds},
};
use std::collections::{BTreeMap, HashMap};

/// What a worker has seen of its vouchers' rebuilds, and its records not yet struck.
#[derive(Debug, Default)]
pub struct Watch {
    /// Each voucher's count of rebuilds, as the last committed transaction read it.
    seen: HashMap<i64, i64>,
    /// `seen` as it was when the worker began its latest reads of the stream.
    noted: HashMap<i64, i64>,
    /// Records made by committed transactions, struck once Redis settled their orders.
    records: Vec<i64>,
}

/// One transaction's locks of its vouchers, with the counts of rebuilds they read.
pub(super) struct Locks(Vec<(i64, Option<i64>)>);

impl Locks {
    /// Locks each voucher of `batch`, in the order of their ids (two transactions
    /// never wait for each other's).
    pub async fn take(tx: &mut Tx<'_>, batch: &[OrderMsg]) -> sqlx::Result<Self> {
        let mut ids: Vec<i64> = batch.iter().map(|m| m.voucher_id).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut locks = Vec::with_capacity(ids.len());
        for id in ids {
            locks.push((id, lock_counting_rebuilds(tx, id).await?));
        }
        Ok(Self(locks))
    }

    /// The vouchers locked.
    pub fn vouchers(&self) -> impl Iterator<Item = i64> + '_ {
        self.0.iter().map(|&(id, _)| id)
    }
}

impl Watch {
    /// Notes the counts seen so far: the worker is about to read the stream, and each
    /// commit of what it reads is compared with these.
    pub fn reads_begin(&mut self) {
        self.noted.clone_from(&self.seen);
    }

    /// Records, in `tx`, the `persisted` orders of each voucher whose count of
    /// rebuilds is not the one noted before the reads. Returns the records made: they
    /// count once `tx` commits ([`Watch::committed`]).
    pub(super) async fn record<'m>(
        &self,
        tx: &mut Tx<'_>,
        locks: &Locks,
        persisted: impl Iterator<Item = &'m OrderMsg> + Clone,
    ) -> sqlx::Result<Vec<i64>> {
        let mut made = Vec::new();
        for &(voucher_id, count) in &locks.0 {
            if count.is_some() && self.noted.get(&voucher_id) == count.as_ref() {
                continue;
            }
            let orders: Vec<(i64, i64)> =
                persisted.clone().filter(|m| m.voucher_id == voucher_id).map(|m| (m.order_id, m.user_id)).collect();
            if !orders.is_empty() {
                made.push(insert(tx, voucher_id, &orders).await?);
            }
        }
        Ok(made)
    }

    /// After the transaction committed: its counts are seen, its records made.
    pub(super) fn committed(&mut self, locks: Locks, records: Vec<i64>) {
        self.seen.extend(locks.0.into_iter().filter_map(|(id, count)| Some((id, count?))));
        self.records.extend(records);
    }

    /// Strikes the records once Redis has settled every order committed so far. A
    /// record the database does not strike now (it cannot write) is left to the
    /// sweeper, which settles its orders again (settling is idempotent) and strikes it.
    pub async fn settled(&mut self, db: &Db) {
        if self.records.is_empty() {
            return;
        }
        match strike(db, &self.records).await {
            Ok(()) => self.records.clear(),
            Err(e) => tracing::warn!("worker: striking {} settled batches: {e}", self.records.len()),
        }
    }
}

/// Records the orders `(order id, user id)` of one voucher; answers the record's id.
async fn insert(tx: &mut Tx<'_>, voucher_id: i64, orders: &[(i64, i64)]) -> sqlx::Result<i64> {
    macro_rules! insert_at {
        ($now:expr) => {
            concat!(
                "INSERT INTO unsettled_batches (voucher_id, orders, saved_at) VALUES ($1, $2, ",
                $now,
                ") RETURNING id"
            )
        };
    }
    let sql = if tx.backend_name() == POSTGRES { insert_at!(now_ms_postgres!()) } else { insert_at!(now_ms_sqlite!()) };
    let orders = serde_json::to_string(orders).unwrap_or_default();
    sqlx::query_scalar(sql).bind(voucher_id).bind(orders).fetch_one(&mut **tx).await
}

/// Strikes the records `records`, in one transaction.
async fn strike(db: &Db, records: &[i64]) -> sqlx::Result<()> {
    let mut tx = db.begin().await?;
    for &id in records {
        sqlx::query("DELETE FROM unsettled_batches WHERE id = $1").bind(id).execute(&mut *tx).await?;
    }
    tx.commit().await
}

/// Settles the recorded batches saved before `before_ms` (the database's clock: their
/// workers are taken as dead, or as cut off from Redis, which settling again does not
/// harm), `limit` at most from past the id `after` (moved on past them: from the start
/// again once the end is reached, so records that keep failing hold back no others),
/// side by side, and strikes their records; one that fails stays for a later round,
/// and the others go on. Answers how many records it met. A voucher Redis does not
/// hold is left to its rebuild, which reads these orders from the database.
pub async fn settle_abandoned(
    backend: &Backend,
    before_ms: i64,
    (after, limit): (&mut i64, i64),
) -> Result<usize, BackendError> {
    let rows: Vec<(i64, i64, String)> = sqlx::query_as(
        "SELECT id, voucher_id, orders FROM unsettled_batches WHERE saved_at < $1 AND id > $2 ORDER BY id LIMIT $3",
    )
    .bind(before_ms)
    .bind(*after)
    .bind(limit)
    .fetch_all(&backend.db)
    .await?;
    *after = crate::backend::next_round_after(rows.last().map(|r| r.0), rows.len(), limit);
    let settled = rows.iter().map(|(id, voucher_id, orders)| settle_record(backend, (*id, *voucher_id), orders));
    let failed = futures::future::join_all(settled).await.into_iter().find_map(Result::err);
    failed.map_or(Ok(rows.len()), Err)
}

/// Settles one record's orders and strikes it.
async fn settle_record(backend: &Backend, (id, voucher_id): (i64, i64), orders: &str) -> Result<(), BackendError> {
    if let Some(v) = vouchers::get(&backend.db, voucher_id).await? {
        // A record the database wrote is well formed; should one not be, nothing can settle it.
        let orders: Vec<(i64, i64)> = serde_json::from_str(orders).unwrap_or_default();
        settle_in_buckets(backend, &v, &orders).await?;
    }
    Ok(strike(&backend.db, &[id]).await?)
}

/// Settles orders `(order id, user id)` of `v`, each in its shopper's bucket. Their
/// entries are not known here: a stream that still holds one delivers it to a worker,
/// which settles the order again and acknowledges it.
async fn settle_in_buckets(
    backend: &Backend,
    v: &vouchers::VoucherRow,
    orders: &[(i64, i64)],
) -> Result<(), BackendError> {
    let mut by_bucket: BTreeMap<u32, Vec<OrderMsg>> = BTreeMap::new();
    for &(order_id, user_id) in orders {
        let m = OrderMsg { voucher_id: v.id, order_id, user_id, price: None };
        by_bucket.entry(bucket_of(user_id, v.shards())).or_default().push(m);
    }
    let mut redis = backend.redis.clone();
    for (bucket, msgs) in by_bucket {
        let keys = backend.bucket_keys(v.bucket(bucket));
        let orders: Vec<(&str, &OrderMsg)> = msgs.iter().map(|m| ("0-0", m)).collect();
        settle(backend, &mut redis, (v.id, &*keys), expires_at(v.ends_at), &orders).await?;
    }
    Ok(())
}
