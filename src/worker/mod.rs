//! The worker: moves granted orders from the voucher streams into SQL.
//!
//! One `reader` per live voucher stream (a sale of several shards has one per bucket)
//! reads it through the stream's consumer group (so several processes share the work), persists a batch in one transaction,
//! then marks the results "success" and acknowledges. Acknowledging last makes it
//! at-least-once; idempotent persistence makes that exactly one order.
//!
//! Recovery, in order of likelihood:
//! - this process stopped mid-batch: at start a reader drains its own pending list;
//! - another process died: entries idle past `claim_idle` are claimed (`recovery`);
//! - the database is down: the batch stays pending and is retried with backoff, as
//!   long as it takes (an outage delays orders, never fails them);
//! - Redis lost a group: the voucher is warmed again (group recreated, stock and
//!   buyers rebuilt from the database);
//! - Redis failed to settle a committed batch: the saver keeps its orders and settles
//!   them before anything else (after a rebuild nobody would deliver them again);
//! - a message the database refuses `max_deliveries` times while it answers other
//!   queries (a poison message): it goes to the dead-letter stream, its result
//!   becomes "failed" and its stock and buyer slot are given back in one Lua step.
//!
//! This file is the supervisor: it starts a reader for each voucher that goes live.
//! A reader (`reader`) joins the group and reads; it hands entries to its saver
//! (`saver`: persist, settle, give back, dead-letter), and asks its recovery
//! (`recovery`) for entries other consumers left idle.

mod name;
mod reader;
mod recovery;
mod saver;
mod wake;

pub use name::{NameLease, LEASE as NAME_LEASE};
pub use saver::Saver;
pub use wake::Wakeups;

use crate::{
    backend::{layout::DRAIN_GRACE_MS, outage::Outage, Backend, RedisConn},
    bus::{self, SaleEvent},
    shutdown::Shutdown,
    voucher::store as vouchers,
};
use reader::Reader;
use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicI64, Ordering},
        Arc,
    },
    time::Duration,
};

/// How often the list of live vouchers is re-read (new vouchers join within this).
const REFRESH_EVERY: Duration = Duration::from_millis(500);

/// Tuning of one worker.
#[derive(Clone, Debug)]
pub struct WorkerSettings {
    /// Consumer name in the groups; one process's at a time (`name`).
    pub consumer: String,
    /// False once another process took the name: the readers stop without leaving.
    pub named: Arc<std::sync::atomic::AtomicBool>,
    pub batch_size: usize,
    /// Longest pause between reads of a stream that had nothing new.
    pub poll_ms: u64,
    pub claim_idle_ms: u64,
    pub max_deliveries: u64,
    /// Each order must be paid this long (ms) after its grab.
    pub pay_timeout_ms: i64,
}

/// Starts this process's worker: one reader per live voucher stream, all on `redis`,
/// the worker's own connection (per node, on a cluster), so neither its replica waits
/// nor its batches queue behind grabs, and connections do not grow with vouchers.
/// One stream per command keeps every command in one hash slot (Redis Cluster).
/// `wakeups` are the bells this process's gate rings when it grants an order.
pub fn spawn(
    backend: Backend,
    redis: RedisConn,
    wakeups: Arc<Wakeups>,
    settings: WorkerSettings,
    shutdown: Shutdown,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(supervise(backend, redis, wakeups, settings, shutdown))
}

/// Starts a reader for each voucher that goes live, until shutdown; then waits for them.
async fn supervise(
    backend: Backend,
    redis: RedisConn,
    wakeups: Arc<Wakeups>,
    settings: WorkerSettings,
    shutdown: Shutdown,
) {
    tracing::info!(consumer = %settings.consumer, "worker started");
    bus::publish(&backend, &SaleEvent::WorkerJoined { worker: settings.consumer.clone() }).await;
    // Each reader, and when its sale begins as last read (kept up to date: its idle
    // pause before the start runs to the start at most).
    let mut readers: HashMap<(i64, u32), (tokio::task::JoinHandle<()>, Arc<AtomicI64>)> = HashMap::new();
    let stopped = shutdown.wait();
    tokio::pin!(stopped);
    // Listing fails while the database is down: said once, then every 30 s.
    let mut outage = Outage::default();
    let listing = format!("worker {}: listing live vouchers", settings.consumer);
    while !shutdown.is_shutdown() {
        // A reader ends once its sale is drained; an operator may put the sale back on
        // (a later end), and its reader is started again.
        readers.retain(|_, (reader, _)| !reader.is_finished());
        match vouchers::live(&backend.db, DRAIN_GRACE_MS).await {
            Ok(live) => {
                outage.ended(&listing);
                for (v, bucket) in live.iter().flat_map(|v| v.buckets().map(move |b| (v, b))) {
                    if let Some((_, begins_at)) = readers.get(&(v.id, bucket)) {
                        begins_at.store(v.begins_at, Ordering::Relaxed);
                        continue;
                    }
                    let (backend, redis, wakeups) = (backend.clone(), redis.clone(), wakeups.clone());
                    let reader = Reader::new(backend, redis, wakeups, settings.clone(), (v.clone(), bucket));
                    let begins_at = reader.begins_at();
                    readers.insert((v.id, bucket), (tokio::spawn(reader.run(shutdown.clone())), begins_at));
                }
            }
            Err(e) => outage.failed(&listing, &e),
        }
        tokio::select! {
            _ = tokio::time::sleep(REFRESH_EVERY) => {}
            _ = &mut stopped => break,
        }
    }
    for (_, (reader, _)) in readers {
        let _ = reader.await;
    }
    tracing::info!(consumer = %settings.consumer, "worker stopped");
    bus::publish(&backend, &SaleEvent::WorkerLeft { worker: settings.consumer.clone() }).await;
}
