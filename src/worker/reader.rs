//! One voucher's reader (of one bucket of its sale, for a sale of several shards):
//! joins the stream's consumer group, drains its own pending list, then reads new
//! entries in batches, persists them and records their fates.

use super::{recovery::Recovery, saver::Saver, Wakeups, WorkerSettings};
use crate::orders::entry::Entry;
use crate::{
    backend::{
        command_then_wait,
        layout::{expires_at, SaleKeys, GROUP},
        outage::Outage,
        Backend, BackendError, RedisConn, Replicas,
    },
    config::MAX_BATCH,
    sale::warm::warm_one,
    shutdown::Shutdown,
    voucher::store::{self as vouchers, VoucherRow},
};
use futures::FutureExt;
use redis::{
    streams::{StreamPendingCountReply, StreamReadOptions},
    AsyncCommands, Value,
};
use std::{
    sync::{
        atomic::{AtomicI64, Ordering},
        Arc,
    },
    time::Duration,
};
use tokio::sync::Notify;

/// First pause after a failed step; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// Longest pause between retries while a store is down: once it is back, every
/// reader is too within this (a grant in this process ends the pause at once).
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// First pause after a read found nothing new; it doubles up to the poll setting.
const FIRST_IDLE: Duration = Duration::from_millis(5);
/// Longest pause between two reads that find nothing, for a sale not begun yet (its
/// start as the worker last read it, every half second: a start moved earlier is
/// followed; this process's own grants ring the reader's bell at once). At
/// `SECKILL_POLL_MS` (100 ms), a thousand buckets of upcoming sales cost ten thousand
/// reads a second per process before any sale opens.
const UPCOMING_POLL: Duration = Duration::from_secs(1);

/// The longest pause between two reads that find nothing: `poll_ms`, or before the
/// sale begins up to [`UPCOMING_POLL`] but never past the start.
fn longest_idle(poll_ms: u64, begins_at_ms: i64, now_ms: i64) -> Duration {
    let poll = Duration::from_millis(poll_ms.max(1));
    let to_start = Duration::from_millis(u64::try_from(begins_at_ms.saturating_sub(now_ms)).unwrap_or(0));
    poll.max(UPCOMING_POLL.min(to_start))
}

/// How many batches' worth a read takes while this process's gate is quiet. During a
/// storm, small batches leave the CPU to the grabs (the backlog waits in Redis, where
/// it is safe); once the grabs stop, large ones drain the backlog sooner (one
/// transaction and one acknowledgement for many orders).
const DRAIN_BATCHES: usize = 5;

/// Where a reader stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Warming the voucher and joining its group: at start, and when Redis lost it.
    Joining,
    /// Re-reading entries delivered to this consumer but never acknowledged: after
    /// joining, and after any failed step.
    DrainingOwn,
    /// Reading new entries.
    Reading,
}

/// Reads one voucher's stream.
pub(super) struct Reader {
    backend: Backend,
    /// The worker's connection, shared by its readers (reads never block it).
    redis: RedisConn,
    /// This process's readers' bells, to hang this one's up when it ends.
    wakeups: Arc<Wakeups>,
    /// Rung by this process's gate when it grants an order here.
    bell: Arc<Notify>,
    settings: WorkerSettings,
    /// The voucher as last read from the database (re-read before every rebuild).
    voucher: VoucherRow,
    /// When its sale begins (Unix ms), as the worker last read it: kept up to date
    /// while this reader runs (an operator may move the start).
    begins_at: Arc<AtomicI64>,
    /// The bucket of its sale this reader reads (0 for a sale of one shard).
    bucket: u32,
    keys: Arc<SaleKeys>,
    phase: Phase,
    backoff: Duration,
    /// A run of failed steps under way (logged once, then every half minute).
    outage: Outage,
    /// Pause before the next read when the last found nothing.
    idle: Duration,
    /// The bell rang while this reader waited for it: grabs are coming in.
    rang: bool,
    /// Takes over entries other consumers left idle.
    recovery: Recovery,
    /// Persists what this reader reads and records their fates.
    saver: Saver,
}

impl Reader {
    pub fn new(
        backend: Backend,
        redis: RedisConn,
        wakeups: Arc<Wakeups>,
        settings: WorkerSettings,
        (voucher, bucket): (VoucherRow, u32),
    ) -> Self {
        let keys = backend.bucket_keys(voucher.bucket(bucket));
        let bell = wakeups.register(voucher.id, bucket);
        let recovery = Recovery::new(keys.clone(), settings.clone());
        let expires = expires_at(voucher.ends_at);
        let saver = Saver::new(backend.clone(), redis.clone(), settings.clone(), (voucher.id, keys.clone()), expires);
        let begins_at = Arc::new(AtomicI64::new(voucher.begins_at));
        Self {
            begins_at,
            redis,
            backend,
            wakeups,
            bell,
            settings,
            voucher,
            bucket,
            keys,
            phase: Phase::Joining,
            backoff: FIRST_BACKOFF,
            outage: Outage::default(),
            idle: FIRST_IDLE,
            rang: false,
            recovery,
            saver,
        }
    }

    /// When its sale begins, for the worker to keep up to date while it runs.
    pub fn begins_at(&self) -> Arc<AtomicI64> {
        self.begins_at.clone()
    }

    /// Works until shutdown or until the stream is past its drain grace.
    pub async fn run(mut self, shutdown: Shutdown) {
        let stopped = shutdown.wait();
        tokio::pin!(stopped);
        while !shutdown.is_shutdown() && !self.drained().await {
            // Not cancelled by shutdown: a read's entries are handled before stopping,
            // and a step is short (one read that never blocks, and its batch).
            let stepped = self.step().await;
            if stepped.is_ok() {
                self.backoff = FIRST_BACKOFF;
                self.outage.ended(&format_args!("worker of voucher {} ({})", self.voucher.id, self.keys.orders));
            }
            match stepped {
                Ok(true) => self.idle = FIRST_IDLE,
                // Nothing new: wait for this process's gate to ring, or poll again
                // later for orders other processes granted.
                Ok(false) => {
                    tokio::select! {
                        _ = self.bell.notified() => {
                            self.idle = FIRST_IDLE;
                            self.rang = true;
                        }
                        _ = tokio::time::sleep(self.idle) => {
                            let now = chrono::Utc::now().timestamp_millis();
                            let begins_at = self.begins_at.load(Ordering::Relaxed);
                            let longest = longest_idle(self.settings.poll_ms, begins_at, now);
                            self.idle = (self.idle * 2).min(longest);
                        }
                        _ = &mut stopped => break,
                    }
                }
                Err(e) => {
                    self.outage
                        .failed(&format_args!("worker of voucher {} ({})", self.voucher.id, self.keys.orders), &e);
                    // Whatever failed, Redis may have lost the group (rejoin), and
                    // entries read before the failure are still this consumer's.
                    self.phase = if e.is_no_group() || self.phase == Phase::Joining {
                        Phase::Joining
                    } else {
                        Phase::DrainingOwn
                    };
                    // A grant here means Redis answers again: no need to wait out the
                    // pause (its order would wait with it).
                    tokio::select! {
                        _ = tokio::time::sleep(self.backoff) => {}
                        _ = self.bell.notified() => self.rang = true,
                        _ = &mut stopped => break,
                    }
                    self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        // Orders committed whose settling failed: one more try before the reader goes.
        if let Err(e) = self.saver.settle_kept().await {
            tracing::warn!(voucher = self.voucher.id, "worker: settling committed orders on leaving: {e}");
        }
        self.leave().await;
        self.wakeups.unregister(self.voucher.id, self.bucket);
    }

    /// Past the drain grace after the sale: nothing more will come. Asked of the row
    /// as it is now before saying so: an operator may have moved the sale's end.
    async fn drained(&mut self) -> bool {
        let past = |v: &VoucherRow| chrono::Utc::now().timestamp_millis() > expires_at(v.ends_at);
        if !past(&self.voucher) {
            return false;
        }
        match vouchers::get(&self.backend.db, self.voucher.id).await {
            Ok(Some(row)) => {
                self.saver.expires = expires_at(row.ends_at);
                self.voucher = row;
                past(&self.voucher)
            }
            // The database cannot say: go on as before, and ask again next step.
            _ => false,
        }
    }

    /// One unit of work: join, or recover idle entries when due and then read and
    /// persist a batch. False when there was nothing new to read.
    async fn step(&mut self) -> Result<bool, BackendError> {
        if self.phase == Phase::Joining {
            self.join().await?;
            self.phase = Phase::DrainingOwn;
            return Ok(true);
        }
        self.saver.reads_begin();
        let claimed = self.recovery.claim_if_due(&mut self.redis).await?;
        if !claimed.fresh.is_empty() || !claimed.worn.is_empty() {
            self.wait_for_replicas(claimed.fresh.iter().chain(&claimed.worn)).await?;
        }
        self.saver.handle(claimed.fresh).await?;
        for e in claimed.worn {
            self.saver.last_try(e).await?;
        }
        let own = self.phase == Phase::DrainingOwn;
        let entries = self.read(own).await?;
        if entries.is_empty() {
            if own {
                self.phase = Phase::Reading;
            }
            return Ok(own);
        }
        self.saver.handle(entries).await?;
        Ok(true)
    }

    /// Warms its bucket of the voucher (a no-op when Redis holds it; a rebuild when
    /// Redis lost it; the other buckets are their readers' business, and one whose
    /// node is down must not keep this one out) and joins its group at once, so
    /// operators (XINFO CONSUMERS) see every worker reading the stream, not only
    /// those that were handed entries.
    async fn join(&mut self) -> Result<(), BackendError> {
        // The row as it is now: a rebuild from a stale row would resurrect sold stock.
        if let Some(row) = vouchers::get(&self.backend.db, self.voucher.id).await? {
            self.saver.expires = expires_at(row.ends_at);
            self.voucher = row;
        }
        warm_one(&self.backend, &self.voucher, self.bucket).await?;
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
    /// A worker whose name another process took leaves nothing: the name is theirs.
    async fn leave(&mut self) {
        if !self.settings.named.load(Ordering::SeqCst) {
            return;
        }
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

    /// Reads new entries (`>`), or this consumer's own pending ones (`0`), without
    /// blocking: a batch while this process's gate grants here, [`DRAIN_BATCHES`]
    /// batches' worth while it is quiet.
    async fn read(&mut self, own_pending: bool) -> Result<Vec<Entry>, BackendError> {
        let granting = std::mem::take(&mut self.rang) || self.bell.notified().now_or_never().is_some();
        let batch = self.settings.batch_size;
        let count = if granting { batch } else { batch.saturating_mul(DRAIN_BATCHES).min(MAX_BATCH).max(batch) };
        let opts = StreamReadOptions::default().group(GROUP, &self.settings.consumer).count(count);
        let id = if own_pending { "0" } else { ">" };
        let reply: Value = self.redis.xread_options(&[&self.keys.orders], &[id], &opts).await?;
        let entries = Entry::from_read(reply)?;
        if !entries.is_empty() {
            self.wait_for_replicas(entries.iter()).await?;
        }
        Ok(entries)
    }

    /// With replicas configured, waits until they hold `entries` (just read, or
    /// claimed), so that what the database saves survives a failover: asynchronous
    /// replication could otherwise lose a grant whose order is saved, and Redis would
    /// sell its unit again and free its shopper's slot. Entries the replicas do not
    /// hold in time are not saved: the step fails, and they are read again from this
    /// consumer's pending list after the pause (their shoppers see `queued` until a
    /// replica holds them; a 30-minute chaos run with network faults found that saving
    /// them anyway broke the books).
    ///
    /// `WAIT` waits for the master's offset as of its own connection's last write (or
    /// last command: Redis versions differ), and a read of this consumer's pending
    /// list writes nothing the replicas get. Sent on its own, a `WAIT` whose
    /// connection died was sent again alone on a connection made anew, where nothing
    /// comes before it, and was answered at once while the replica was behind: a
    /// grant no replica held was saved. So the entries are claimed again (`XCLAIM …
    /// JUSTID`: a write the replicas get, after the grants' own) in one pipeline with
    /// the `WAIT`; sent again, both go. If the master failed over before, the new
    /// master answers both, and the settling after the save takes the unit and the
    /// slot of a grant it lost (`settle.lua`); a new master without the stream's group
    /// (it lost the sale) answers the claim `NOGROUP`, and the batch is saved as before
    /// the claim was sent (the sale is rebuilt from the database, which then has it).
    async fn wait_for_replicas<'e>(&mut self, entries: impl Iterator<Item = &'e Entry>) -> Result<(), BackendError> {
        let Replicas { want, wait_ms } = self.backend.replicas;
        if want == 0 {
            return Ok(());
        }
        let mut claim = redis::cmd("XCLAIM");
        claim.arg(&self.keys.orders).arg(GROUP).arg(&self.settings.consumer).arg(0);
        for entry in entries {
            claim.arg(&entry.id);
        }
        claim.arg("JUSTID");
        let have = match command_then_wait(claim, &mut self.redis, want, wait_ms).await {
            Ok(have) => have,
            Err(e) if e.code() == Some("NOGROUP") => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        if have < want {
            metrics::counter!("seckill_replica_waits_short_total").increment(1);
            return Err(BackendError::ReplicasBehind { have, want });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sale_not_begun_is_read_at_most_once_a_second_when_idle() {
        let begins = 1_000_000;
        assert_eq!(longest_idle(100, begins, begins - 60_000), UPCOMING_POLL);
        assert_eq!(longest_idle(100, begins, begins - 400), Duration::from_millis(400), "never past the start");
        assert_eq!(longest_idle(100, begins, begins - 1), Duration::from_millis(100));
        assert_eq!(longest_idle(100, begins, begins), Duration::from_millis(100), "from its start, the poll");
        assert_eq!(longest_idle(5_000, begins, begins - 1), Duration::from_secs(5), "a longer poll stays");
        assert_eq!(longest_idle(0, begins, begins + 1), Duration::from_millis(1));
    }
}
