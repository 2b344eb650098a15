//! The worker: moves granted orders from the voucher streams into SQL.
//!
//! One reader per live voucher reads its stream through the voucher's consumer group
//! (so several processes share the work), persists a batch in one transaction, then
//! marks the results "success" and acknowledges. Acknowledging last makes it at-least-once;
//! idempotent persistence makes that exactly one order.
//!
//! Recovery, in order of likelihood:
//! - this process stopped mid-batch: at start it drains its own pending list first;
//! - another process died: entries idle past `claim_idle` are claimed (XCLAIM);
//! - the database is down: the batch stays pending and is retried with backoff, as
//!   long as it takes (an outage delays orders, never fails them);
//! - Redis lost a group: the voucher is warmed again (group recreated, stock and
//!   buyers rebuilt from the database);
//! - a message the database refuses `max_deliveries` times while it answers other
//!   queries (a poison message): it goes to the dead-letter stream, its result
//!   becomes "failed" and its stock and buyer slot are given back in one Lua step.

use super::store::{self, OrderMsg, Outcome};
use crate::{
    sale::{
        gate::GiveBack,
        keys::{SaleKeys, GROUP},
    },
    state::AppState,
    voucher::{
        store::{self as vouchers, VoucherRow},
        warm::{warm, WarmError},
    },
};
use redis::{
    aio::{ConnectionManager, ConnectionManagerConfig},
    streams::{StreamId, StreamPendingCountReply, StreamReadOptions, StreamReadReply},
    AsyncCommands,
};
use std::{
    collections::{HashMap, HashSet},
    time::Duration,
};
use tokio::{sync::watch, time::Instant};

/// How long after its end a voucher's stream is still read.
const DRAIN_GRACE_MS: i64 = 24 * 3600 * 1000;
/// How often the list of live vouchers is re-read (new vouchers join within this).
const REFRESH_EVERY: Duration = Duration::from_millis(500);
/// Longest pause between retries while the database is down.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Tuning of one worker.
#[derive(Clone, Debug)]
pub struct WorkerSettings {
    /// Consumer name in the groups; unique per process.
    pub consumer: String,
    pub batch_size: usize,
    pub block_ms: u64,
    pub claim_idle_ms: u64,
    pub max_deliveries: u64,
}

/// Starts this process's worker: one reader per live voucher stream, each with a
/// connection of its own. One stream per read keeps every command in one hash slot
/// (Redis Cluster), and a blocking read on a connection of its own holds up nobody.
pub fn spawn(
    state: AppState,
    client: redis::Client,
    settings: WorkerSettings,
    shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(supervise(state, client, settings, shutdown))
}

/// Starts a reader for each voucher that goes live, until shutdown; then waits for them.
async fn supervise(
    state: AppState,
    client: redis::Client,
    settings: WorkerSettings,
    mut shutdown: watch::Receiver<bool>,
) {
    tracing::info!(consumer = %settings.consumer, "worker started");
    announce(&state, "worker_joined", &settings.consumer).await;
    let mut readers: HashMap<i64, tokio::task::JoinHandle<()>> = HashMap::new();
    while !*shutdown.borrow() {
        match vouchers::live(&state.db, DRAIN_GRACE_MS).await {
            Ok(live) => {
                for v in live {
                    if readers.contains_key(&v.id) {
                        continue;
                    }
                    let config = ConnectionManagerConfig::new().set_connection_timeout(Duration::from_secs(5));
                    match ConnectionManager::new_with_config(client.clone(), config).await {
                        Ok(redis) => {
                            let reader = Worker::new(state.clone(), redis, settings.clone(), v);
                            readers.insert(reader.voucher.id, tokio::spawn(reader.run(shutdown.clone())));
                        }
                        Err(e) => tracing::warn!("worker: connecting for voucher {}: {e}", v.id),
                    }
                }
            }
            Err(e) => tracing::warn!("worker: listing live vouchers: {e}"),
        }
        tokio::select! {
            _ = tokio::time::sleep(REFRESH_EVERY) => {}
            _ = shutdown.changed() => break,
        }
    }
    for (_, reader) in readers {
        let _ = reader.await;
    }
    tracing::info!(consumer = %settings.consumer, "worker stopped");
    announce(&state, "worker_left", &settings.consumer).await;
}

/// Tells every dashboard (through the sale events channel) that this worker came or went.
async fn announce(state: &AppState, what: &str, consumer: &str) {
    let channel = crate::sale::keys::events_channel(&state.namespace);
    let mut redis = state.redis.clone();
    let sent: redis::RedisResult<i64> = redis.publish(channel, format!("{what}:{consumer}")).await;
    if let Err(e) = sent {
        tracing::warn!("worker: announcing {what}: {e}");
    }
}

/// Reads one voucher's stream.
struct Worker {
    state: AppState,
    redis: ConnectionManager,
    settings: WorkerSettings,
    voucher: VoucherRow,
    keys: SaleKeys,
    /// Times the database refused an entry on its own, by entry id.
    poison_strikes: HashMap<String, u64>,
}

/// One stream entry: where it came from and what it says.
struct Entry {
    keys: SaleKeys,
    id: String,
    msg: Option<OrderMsg>,
}

impl Worker {
    fn new(state: AppState, redis: ConnectionManager, settings: WorkerSettings, voucher: VoucherRow) -> Self {
        let keys = SaleKeys::new(&state.namespace, voucher.id);
        Self { state, redis, settings, voucher, keys, poison_strikes: HashMap::new() }
    }

    async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let mut joined = false;
        let mut drain_own = true;
        let mut backoff = Duration::from_millis(100);
        let mut next_recover = Instant::now();
        let recover_every = Duration::from_millis((self.settings.claim_idle_ms / 2).clamp(50, 5_000));
        while !*shutdown.borrow() && !self.drained() {
            // Not cancelled by shutdown: a read's entries are handled before stopping,
            // and a step is short (one blocking read of at most `block_ms`).
            let step = if joined {
                self.step(drain_own, &mut next_recover, recover_every).await
            } else {
                self.join().await.map(|()| 0)
            };
            match step {
                Ok(_) if !joined => joined = true,
                Ok(0) if drain_own => drain_own = false,
                Ok(_) => backoff = Duration::from_millis(100),
                Err(e) => {
                    tracing::warn!(voucher = self.voucher.id, "worker: {e}; retrying in {backoff:?}");
                    drain_own = true;
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = shutdown.changed() => break,
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        self.leave().await;
    }

    /// Past the drain grace after the sale: nothing more will come.
    fn drained(&self) -> bool {
        chrono::Utc::now().timestamp_millis() > self.voucher.ends_at + DRAIN_GRACE_MS
    }

    /// Warms the voucher (a no-op when Redis holds it; a rebuild when Redis lost it)
    /// and joins its group at once, so operators (XINFO CONSUMERS) see every worker
    /// reading the stream, not only those that were handed entries.
    async fn join(&mut self) -> Result<(), WorkError> {
        // The row as it is now: a rebuild from a stale row would resurrect sold stock.
        if let Some(row) = vouchers::get(&self.state.db, self.voucher.id).await? {
            self.voucher = row;
        }
        warm(&self.state, &self.voucher).await?;
        let _: i64 = redis::cmd("XGROUP")
            .arg("CREATECONSUMER")
            .arg(&self.keys.orders)
            .arg(GROUP)
            .arg(&self.settings.consumer)
            .query_async(&mut self.redis)
            .await?;
        Ok(())
    }

    /// Leaves the group if it holds nothing pending, so dead names do not pile up
    /// (names are unique per process). Entries it still holds stay for others to claim.
    async fn leave(&mut self) {
        let mine: redis::RedisResult<StreamPendingCountReply> = redis::cmd("XPENDING")
            .arg(&self.keys.orders)
            .arg(GROUP)
            .arg("-")
            .arg("+")
            .arg(1)
            .arg(&self.settings.consumer)
            .query_async(&mut self.redis)
            .await;
        if mine.is_ok_and(|p| p.ids.is_empty()) {
            let left: redis::RedisResult<i64> = redis::cmd("XGROUP")
                .arg("DELCONSUMER")
                .arg(&self.keys.orders)
                .arg(GROUP)
                .arg(&self.settings.consumer)
                .query_async(&mut self.redis)
                .await;
            if let Err(e) = left {
                tracing::warn!("worker: leaving {}: {e}", self.keys.orders);
            }
        }
    }

    /// One unit of work: recover idle entries when due, then read and persist a batch.
    /// Returns how many entries it handled.
    async fn step(&mut self, drain_own: bool, next_recover: &mut Instant, every: Duration) -> Result<usize, WorkError> {
        if Instant::now() >= *next_recover {
            self.recover().await?;
            *next_recover = Instant::now() + every;
        }
        let entries = match self.read(drain_own).await {
            // Redis lost the group (and maybe the voucher): warm it again.
            Err(WorkError::Redis(e)) if e.code() == Some("NOGROUP") => {
                tracing::warn!(voucher = self.voucher.id, "worker: {e}; warming the voucher again");
                self.join().await?;
                return Ok(0);
            }
            other => other?,
        };
        let n = entries.len();
        self.handle(entries).await?;
        Ok(n)
    }

    /// Reads new entries (`>`), or this consumer's own pending ones (`0`).
    async fn read(&mut self, own_pending: bool) -> Result<Vec<Entry>, WorkError> {
        let mut opts =
            StreamReadOptions::default().group(GROUP, &self.settings.consumer).count(self.settings.batch_size);
        if !own_pending {
            opts = opts.block(self.settings.block_ms as usize);
        }
        let id = if own_pending { "0" } else { ">" };
        let reply: Option<StreamReadReply> = self.redis.xread_options(&[&self.keys.orders], &[id], &opts).await?;
        let keys = &self.keys;
        Ok(reply
            .map(|r| r.keys)
            .unwrap_or_default()
            .into_iter()
            .flat_map(|stream| stream.ids)
            .map(|e| entry(keys, e))
            .collect())
    }

    /// Persists entries, in one transaction if it can, else one by one.
    async fn handle(&mut self, entries: Vec<Entry>) -> Result<(), WorkError> {
        let (good, bad): (Vec<Entry>, Vec<Entry>) = entries.into_iter().partition(|e| e.msg.is_some());
        for e in &bad {
            tracing::error!(entry = %e.id, stream = %e.keys.orders, "malformed order entry, acknowledged and dropped");
            let _: i64 = self.redis.xack(&e.keys.orders, GROUP, &[&e.id]).await?;
        }
        if good.is_empty() {
            return Ok(());
        }
        let msgs: Vec<OrderMsg> = good.iter().filter_map(|e| e.msg.clone()).collect();
        match store::persist(&self.state.db, &msgs).await {
            Ok(outcomes) => self.finish(&good, &outcomes).await,
            Err(e) if good.len() == 1 => self.refused(&good[0], e).await,
            Err(e) => {
                tracing::warn!("worker: batch of {} failed ({e}); retrying one by one", good.len());
                for e in &good {
                    let msg = e.msg.clone().into_iter().collect::<Vec<_>>();
                    match store::persist(&self.state.db, &msg).await {
                        Ok(outcomes) => self.finish(std::slice::from_ref(e), &outcomes).await?,
                        Err(err) => self.refused(e, err).await?,
                    }
                }
                Ok(())
            }
        }
    }

    /// The database refused one entry on its own. A refusal of the data itself (a
    /// constraint) counts a strike; anything else means the database is unwell, and
    /// the entry waits.
    async fn refused(&mut self, e: &Entry, err: sqlx::Error) -> Result<(), WorkError> {
        let poison = matches!(&err, sqlx::Error::Database(d) if d.kind() != sqlx::error::ErrorKind::Other);
        if !poison {
            return Err(err.into());
        }
        let strikes = self.poison_strikes.entry(e.id.clone()).or_default();
        *strikes += 1;
        tracing::warn!(entry = %e.id, strikes = *strikes, "database refused order: {err}");
        if *strikes >= self.settings.max_deliveries {
            self.poison_strikes.remove(&e.id);
            self.dead_letter(e).await?;
        }
        Ok(())
    }

    /// Records the outcomes in Redis: results, acknowledgements, give-backs.
    async fn finish(&mut self, entries: &[Entry], outcomes: &[Outcome]) -> Result<(), WorkError> {
        let mut pipe = redis::pipe();
        for (e, outcome) in entries.iter().zip(outcomes) {
            let Some(m) = &e.msg else { continue };
            match outcome {
                Outcome::Persisted => {
                    self.poison_strikes.remove(&e.id);
                    pipe.hset(&e.keys.results, m.order_id, format!("success:{}", m.user_id)).ignore();
                    pipe.xack(&e.keys.orders, GROUP, &[&e.id]).ignore();
                }
                Outcome::Duplicate => self.give_back(e, "already_bought", true, false, false).await?,
                Outcome::NoStock => self.give_back(e, "sold_out", false, true, false).await?,
            }
        }
        let () = pipe.query_async(&mut self.redis).await?;
        Ok(())
    }

    /// Gives up on an entry: unless the database has the order after all, it goes to
    /// the dead-letter stream and its stock and buyer slot are given back.
    async fn dead_letter(&mut self, e: &Entry) -> Result<(), WorkError> {
        let Some(m) = &e.msg else { return Ok(()) };
        if store::exists(&self.state.db, m.order_id).await? {
            return self.finish(std::slice::from_ref(e), &[Outcome::Persisted]).await;
        }
        tracing::error!(order = m.order_id, entry = %e.id, "order dead-lettered");
        self.give_back(e, "dead_letter", true, true, true).await
    }

    async fn give_back(
        &mut self,
        e: &Entry,
        reason: &str,
        stock: bool,
        slot: bool,
        dead: bool,
    ) -> Result<(), WorkError> {
        let Some(m) = &e.msg else { return Ok(()) };
        let g = GiveBack {
            order_id: m.order_id,
            user_id: m.user_id,
            voucher_id: m.voucher_id,
            reason,
            entry_id: &e.id,
            give_stock: stock,
            give_slot: slot,
            dead_letter: dead,
        };
        self.state.scripts.give_back(&mut self.redis, &e.keys, &g).await?;
        Ok(())
    }

    /// Takes over entries left idle too long (their consumer died, or this one failed
    /// on them). Those delivered `max_deliveries` times get one last try on their own.
    async fn recover(&mut self) -> Result<(), WorkError> {
        let keys = self.keys.clone();
        let pending: StreamPendingCountReply = redis::cmd("XPENDING")
            .arg(&keys.orders)
            .arg(GROUP)
            .arg("IDLE")
            .arg(self.settings.claim_idle_ms)
            .arg("-")
            .arg("+")
            .arg(self.settings.batch_size)
            .query_async(&mut self.redis)
            .await?;
        if pending.ids.is_empty() {
            return Ok(());
        }
        let worn: HashSet<String> = pending
            .ids
            .iter()
            .filter(|p| p.times_delivered as u64 >= self.settings.max_deliveries)
            .map(|p| p.id.clone())
            .collect();
        let ids: Vec<String> = pending.ids.into_iter().map(|p| p.id).collect();
        let claimed: redis::streams::StreamClaimReply =
            self.redis.xclaim(&keys.orders, GROUP, &self.settings.consumer, self.settings.claim_idle_ms, &ids).await?;
        tracing::info!(stream = %keys.orders, claimed = claimed.ids.len(), "took over idle orders");
        let (last_tries, fresh): (Vec<Entry>, Vec<Entry>) =
            claimed.ids.into_iter().map(|e| entry(&keys, e)).partition(|e| worn.contains(&e.id));
        self.handle(fresh).await?;
        for e in last_tries {
            self.last_try(e).await?;
        }
        Ok(())
    }

    /// One more try for an entry delivered too often. If the database is up and still
    /// will not take it, it is dead-lettered; if the database is down, it waits: an
    /// outage delays orders, it never fails them.
    async fn last_try(&mut self, e: Entry) -> Result<(), WorkError> {
        let Some(msg) = e.msg.clone() else { return self.handle(vec![e]).await };
        match store::persist(&self.state.db, &[msg]).await {
            Ok(outcomes) => self.finish(std::slice::from_ref(&e), &outcomes).await,
            Err(err) if store::reachable(&self.state.db).await => {
                tracing::warn!(entry = %e.id, "order keeps failing: {err}");
                self.dead_letter(&e).await
            }
            Err(err) => Err(err.into()),
        }
    }
}

fn entry(keys: &SaleKeys, e: StreamId) -> Entry {
    let msg = (|| {
        Some(OrderMsg {
            voucher_id: e.get::<String>("voucher")?.parse().ok()?,
            order_id: e.get::<String>("order")?.parse().ok()?,
            user_id: e.get::<String>("user")?.parse().ok()?,
        })
    })();
    Entry { keys: keys.clone(), id: e.id, msg }
}

#[derive(Debug, thiserror::Error)]
pub enum WorkError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

impl From<WarmError> for WorkError {
    fn from(e: WarmError) -> Self {
        match e {
            WarmError::Redis(e) => Self::Redis(e),
            WarmError::Db(e) => Self::Db(e),
        }
    }
}
