//! This process's count of the refusals it answered and of the gate's latency, per
//! sale, added to the database about once a second ([`spawn`]), when the process has
//! stopped serving, and before a report is read ([`Tally::flush`]). Counted where the
//! answer is made (the grab, the front door's rate limit), so the report counts what
//! shoppers were told, refusals made without Redis (a sold-out flag, admission control,
//! a rate limit) included.
//!
//! A flush that fails puts its counts back for the next one, and a flush whose caller
//! went away (a report request dropped) finishes on its own. A process killed outright
//! loses what it counted since its last flush (at most about a second of refusals);
//! grants are not counted here and lose nothing (the orders are their record). Memory
//! is bounded whatever callers send: past [`MAX_KEYS`] counts held, new ones are
//! dropped until the next flush.

use super::{latency_bucket, store, Outcome, LATENCY_BOUNDS_US};
use crate::{
    backend::Db,
    shutdown::{self, Shutdown},
};
use std::{
    collections::HashMap,
    mem,
    sync::{Arc, Mutex},
    time::Duration,
};

/// How often each process adds its counts to the database.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// Most counts held between two flushes: a live sale needs a few dozen a second (one
/// per answer code, and one per latency bucket seen).
pub const MAX_KEYS: usize = 4_096;

#[derive(Default)]
pub struct Tally {
    counts: Mutex<Counts>,
}

/// Counts not yet in the database.
#[derive(Default)]
pub struct Counts {
    /// (voucher, Unix second, outcome) → refusals.
    pub refusals: HashMap<(i64, i64, Outcome), i64>,
    /// (voucher, latency bucket) → grabs.
    pub latency: HashMap<(i64, usize), i64>,
}

impl Counts {
    fn is_empty(&self) -> bool {
        self.refusals.is_empty() && self.latency.is_empty()
    }

    fn is_full(&self) -> bool {
        self.refusals.len() + self.latency.len() >= MAX_KEYS
    }

    fn refused(&mut self, voucher_id: i64, second: i64, outcome: Outcome) {
        let key = (voucher_id, second, outcome);
        if let Some(n) = self.refusals.get_mut(&key) {
            *n += 1;
        } else if !self.is_full() {
            self.refusals.insert(key, 1);
        }
    }

    fn took(&mut self, voucher_id: i64, took: Duration) {
        let key = (voucher_id, latency_bucket(took.as_micros() as u64));
        if let Some(n) = self.latency.get_mut(&key) {
            *n += 1;
        } else if !self.is_full() {
            self.latency.insert(key, 1);
        }
    }

    fn add(&mut self, other: Counts) {
        for (k, n) in other.refusals {
            *self.refusals.entry(k).or_default() += n;
        }
        for (k, n) in other.latency {
            *self.latency.entry(k).or_default() += n;
        }
    }
}

impl Tally {
    /// A grab of `voucher_id` answered `outcome` without asking the gate (grants are
    /// not counted here).
    pub fn answered(&self, voucher_id: i64, outcome: Outcome) {
        if outcome != Outcome::Granted {
            // The clock is read before the lock: every serving thread takes it.
            let second = chrono::Utc::now().timestamp();
            self.lock().refused(voucher_id, second, outcome);
        }
    }

    /// A grab of `voucher_id` the gate took `took` to answer, with `outcome` (none:
    /// not a sale's answer, as an unknown voucher): one lock for both counts.
    pub fn decided(&self, voucher_id: i64, outcome: Option<Outcome>, took: Duration) {
        let refused = outcome.filter(|o| *o != Outcome::Granted).map(|o| (chrono::Utc::now().timestamp(), o));
        let mut counts = self.lock();
        counts.took(voucher_id, took);
        if let Some((second, outcome)) = refused {
            counts.refused(voucher_id, second, outcome);
        }
    }

    /// Adds what was counted to the database; on failure keeps it for the next flush.
    /// The write runs in a task of its own, so a caller that goes away mid-write (a
    /// report request dropped) loses nothing.
    pub async fn flush(self: &Arc<Self>, db: &Db) -> sqlx::Result<()> {
        let taken = mem::take(&mut *self.lock());
        if taken.is_empty() {
            return Ok(());
        }
        let (tally, db) = (self.clone(), db.clone());
        let write = tokio::spawn(async move {
            let written = store::add_counts(&db, &taken).await;
            if written.is_err() {
                tally.lock().add(taken);
            }
            written
        });
        write.await.unwrap_or_else(|e| Err(sqlx::Error::Protocol(format!("report tally: {e}"))))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        // A panic while counting leaves the counts whole: go on with them.
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Flushes `tally` every [`FLUSH_EVERY`] until the process stops (the server flushes
/// once more when it has stopped serving).
pub fn spawn(tally: Arc<Tally>, db: Db, shutdown: Shutdown) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut rounds = shutdown::interval(FLUSH_EVERY);
        let mut failing = false;
        while shutdown.tick(&mut rounds).await {
            match tally.flush(&db).await {
                Ok(()) => failing = false,
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!("report tally: {e}; keeping the counts for the next flush");
                }
                Err(_) => {}
            }
        }
    })
}

/// The bucket bounds, for the store.
pub(super) fn bound_of(bucket: usize) -> i64 {
    LATENCY_BOUNDS_US[bucket.min(LATENCY_BOUNDS_US.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_refusals_by_sale_second_and_code_and_latency_by_bucket() {
        let t = Tally::default();
        t.answered(7, Outcome::SoldOut);
        t.answered(7, Outcome::SoldOut);
        t.answered(7, Outcome::Granted);
        t.answered(8, Outcome::Shed);
        t.decided(7, Some(Outcome::SoldOut), Duration::from_micros(150));
        let c = mem::take(&mut *t.lock());
        let per = |v: i64, o: Outcome| {
            c.refusals.iter().filter(|((cv, _, co), _)| *cv == v && *co == o).map(|(_, n)| n).sum::<i64>()
        };
        assert_eq!((per(7, Outcome::SoldOut), per(7, Outcome::Granted), per(8, Outcome::Shed)), (3, 0, 1));
        assert_eq!(c.latency.get(&(7, 1)), Some(&1));
    }

    #[test]
    fn holds_at_most_so_many_counts_whatever_callers_send() {
        let t = Tally::default();
        for voucher in 0..(MAX_KEYS as i64 + 100) {
            t.answered(voucher, Outcome::RateLimited);
        }
        let c = mem::take(&mut *t.lock());
        assert_eq!(c.refusals.len(), MAX_KEYS);
    }
}
