//! The narrow handle to the stores: the SQL pool, Redis, the Lua scripts and the key
//! namespace. Background tasks (warm-up, worker, sampler) take a [`Backend`], not the
//! request state, as realworld-axum-sqlx's `ApiContext` does; server functions reach it
//! through the state.
//!
//! [`BackendError`] is the one error of this layer: a store that did not answer. It
//! converts into the API's `unavailable` refusal, so `?` is all a caller writes.

use crate::error::{AppError, ErrorCode};
use layout::{events_channel, Bucket, SaleKeys, Scripts};

pub mod db_clock;
pub mod layout;
pub mod layout_version;
pub mod lone_task;
pub mod outage;
mod redis_conn;
mod script_call;
pub use redis_conn::{RedisConn, RedisTarget};
pub use script_call::{command_then_wait, invoke_then_wait, ScriptCall};

/// The SQL pool: SQLite or PostgreSQL, chosen by `DATABASE_URL`'s scheme at run time.
/// Every statement is written once, in SQL both engines run (`$1` placeholders), but
/// the worker's insert, which reads JSON with each engine's own function
/// (`orders::store`).
pub type Db = sqlx::AnyPool;
/// A transaction on [`Db`].
pub type Tx<'a> = sqlx::Transaction<'a, sqlx::Any>;

/// Where a background round that reads owed work by id, `limit` rows from past a
/// cursor, reads on from the next time: past the last row it read (`last`, of `read`
/// rows), or from the start again once it read the end. So rows that keep failing (a
/// node down, cut off) hold back none behind them however many they are.
pub fn next_round_after(last: Option<i64>, read: usize, limit: i64) -> i64 {
    match last {
        Some(id) if read as i64 >= limit => id,
        _ => 0,
    }
}

/// The first row a write's `RETURNING` gave, its statement read to the end (give it
/// the statement's `fetch_all`). On SQLite a write outside a transaction commits as
/// its statement finishes: `fetch_one` and `fetch_optional` stop at the first row, and
/// a commit that then fails (a full disk) goes unseen, so the caller is told of a row
/// that was never stored. In a drill (2026-11-30), sign-ups on a full disk answered
/// 200, most with one user id nobody had. Read to the end, the failure is the call's.
pub async fn written<T>(rows: impl std::future::Future<Output = sqlx::Result<Vec<T>>>) -> sqlx::Result<Option<T>> {
    Ok(rows.await?.into_iter().next())
}
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

/// Cheap to clone: every field is a handle.
#[derive(Clone)]
pub struct Backend {
    /// The durable record: users, vouchers, orders.
    pub db: Db,
    /// One multiplexed, self-reconnecting connection (per node, on a cluster), shared by
    /// everything on one serving runtime ([`Backend::with_redis`]).
    pub redis: RedisConn,
    /// The Lua scripts, loaded once and run by SHA.
    pub scripts: Arc<Scripts>,
    /// Prefix of every Redis key and channel.
    pub namespace: Arc<str>,
    /// The pub/sub channel of sale events, named once (every grab hands it to the gate).
    pub events_channel: Arc<str>,
    /// Key names already built, by voucher and bucket: every grab needs six of its
    /// bucket's nine.
    sale_keys: Arc<Mutex<KeysByBucket>>,
    /// The shards of each sale this process has met (fixed when a voucher is made;
    /// `voucher::buckets` fills it from the database).
    shards: Arc<std::sync::RwLock<HashMap<i64, u32>>>,
    /// Replicas that must hold a write before it counts as durable (none by default).
    pub replicas: Replicas,
    /// The connection an operator's changes wait for replicas on (`WAIT` holds up the
    /// commands sent after it on its connection until the replicas answer, up to
    /// `SECKILL_WAIT_REPLICAS_MS`): one of their own, so the serving runtimes' grabs
    /// never queue behind them. `redis` itself unless replicas are required.
    pub waits: RedisConn,
    /// The connection blocks of order ids are taken on, waiting for replicas
    /// (`order_ids`): one of their own too, so a grab that finds no id in hand waits
    /// for its block alone, never behind an operator's change. `redis` itself unless
    /// replicas are required.
    pub id_blocks: RedisConn,
    /// Sales this process met in a newer Redis layout than it speaks.
    pub newer_layouts: Arc<layout_version::NewerLayouts>,
}

/// Key names of each bucket of each sale.
type KeysByBucket = HashMap<Bucket, Arc<SaleKeys>>;

/// Redis replicas that must hold a write (Redis `WAIT`) before the app counts on it
/// surviving a failover: the orders a worker read before it saves them, a cancelled
/// order's give-back before its debt is struck, an operator's change of a sale (its
/// stock, its window) before it answers, and a block of order ids before it is used
/// (`SECKILL_WAIT_REPLICAS`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Replicas {
    /// How many; 0: no replicas, no wait.
    pub want: u32,
    /// Longest wait (ms).
    pub wait_ms: u64,
}

/// The most vouchers whose key names are kept; then the cache starts again (a caller
/// naming made-up vouchers cannot grow it without bound).
const SALE_KEYS_KEPT: usize = 4096;

impl Backend {
    pub fn new(db: Db, redis: RedisConn, namespace: &str) -> Self {
        Self {
            db,
            waits: redis.clone(),
            id_blocks: redis.clone(),
            redis,
            scripts: Arc::new(Scripts::default()),
            namespace: namespace.into(),
            events_channel: events_channel(namespace).into(),
            sale_keys: Arc::default(),
            shards: Arc::default(),
            replicas: Replicas::default(),
            newer_layouts: Arc::default(),
        }
    }

    /// The same, counting a write durable once `replicas` hold it.
    pub fn with_replicas(self, replicas: Replicas) -> Self {
        Self { replicas, ..self }
    }

    /// The same, with `waits` as the connection operators' changes wait for replicas on,
    /// and `id_blocks` the one order id blocks do.
    pub fn with_waits(self, waits: RedisConn, id_blocks: RedisConn) -> Self {
        Self { waits, id_blocks, ..self }
    }

    /// The same stores and caches, with `redis` as the connection: a serving runtime's
    /// own (`server::runtimes`), so its grabs' replies are read on its thread.
    pub fn with_redis(&self, redis: RedisConn) -> Self {
        Self { redis, ..self.clone() }
    }

    /// The Redis keys of one voucher's sale: its bucket 0, the whole sale when it has
    /// one shard (its window, which every bucket copies, is read here).
    pub fn keys(&self, voucher_id: i64) -> Arc<SaleKeys> {
        self.bucket_keys(Bucket::whole(voucher_id))
    }

    /// The Redis keys of one bucket of a sale.
    pub fn bucket_keys(&self, bucket: Bucket) -> Arc<SaleKeys> {
        let mut built = self.sale_keys.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if built.len() >= SALE_KEYS_KEPT && !built.contains_key(&bucket) {
            built.clear();
        }
        built.entry(bucket).or_insert_with(|| Arc::new(SaleKeys::of_bucket(&self.namespace, bucket))).clone()
    }

    /// The shards of `voucher_id`'s sale, when this process has met it.
    pub fn known_shards(&self, voucher_id: i64) -> Option<u32> {
        // Read on every grab: a read lock, which grabs share.
        self.shards.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(&voucher_id).copied()
    }

    /// Notes the shards of `voucher_id`'s sale (read from its row).
    pub fn note_shards(&self, voucher_id: i64, shards: u32) {
        if self.known_shards(voucher_id) == Some(shards) {
            return;
        }
        let mut known = self.shards.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if known.len() >= SALE_KEYS_KEPT && !known.contains_key(&voucher_id) {
            known.clear();
        }
        known.insert(voucher_id, shards);
    }
}

/// A store did not answer (or refused a command).
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    /// Fewer replicas than required hold a write yet (Redis `WAIT` ran out): what
    /// depends on it waits, since a failover now could lose the write.
    #[error("redis: {have} of {want} replicas hold the writes")]
    ReplicasBehind { have: u32, want: u32 },
}

impl BackendError {
    /// Redis has no consumer group for the stream: it lost the voucher.
    pub fn is_no_group(&self) -> bool {
        matches!(self, Self::Redis(e) if e.code() == Some("NOGROUP"))
    }
}

/// Logs what failed and answers a retryable refusal that reveals nothing of it.
impl From<BackendError> for AppError {
    fn from(e: BackendError) -> Self {
        // Every call fails while a store is down: said at most once a second.
        static SAID: outage::Throttle = outage::Throttle::new();
        if let Some(left_out) = SAID.allow() {
            tracing::warn!(left_out, "unavailable: {e}");
        }
        Self::new(ErrorCode::Unavailable)
    }
}

impl From<redis::RedisError> for AppError {
    fn from(e: redis::RedisError) -> Self {
        BackendError::from(e).into()
    }
}

impl From<sqlx::Error> for AppError {
    fn from(e: sqlx::Error) -> Self {
        BackendError::from(e).into()
    }
}
