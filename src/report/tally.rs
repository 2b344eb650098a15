//! This process's count of the refusals it answered and of the gate's latency, per
//! sale, added to the database about once a second ([`spawn`]) and before a report is
//! read ([`Tally::flush`]). Counted where the answer is made (the grab, the front
//! door's rate limit), so the report counts what shoppers were told, refusals made
//! without Redis (a sold-out flag, admission control, a rate limit) included.
//!
//! A flush that fails puts its counts back for the next one. A process killed outright
//! loses what it counted since its last flush (at most about a second of refusals);
//! grants are not counted here and lose nothing (the orders are their record).

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
    /// A grab of `voucher_id` answered `outcome` now (grants are not counted here).
    pub fn answered(&self, voucher_id: i64, outcome: Outcome) {
        if outcome == Outcome::Granted {
            return;
        }
        let second = chrono::Utc::now().timestamp();
        *self.lock().refusals.entry((voucher_id, second, outcome)).or_default() += 1;
    }

    /// The gate took `took` to decide a grab of `voucher_id`.
    pub fn gate_took(&self, voucher_id: i64, took: Duration) {
        let bucket = latency_bucket(took.as_micros() as u64);
        *self.lock().latency.entry((voucher_id, bucket)).or_default() += 1;
    }

    /// Adds what was counted to the database; on failure keeps it for the next flush.
    pub async fn flush(&self, db: &Db) -> sqlx::Result<()> {
        let taken = mem::take(&mut *self.lock());
        if taken.is_empty() {
            return Ok(());
        }
        let written = store::add_counts(db, &taken).await;
        if written.is_err() {
            self.lock().add(taken);
        }
        written
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        // A panic while counting leaves the counts whole: go on with them.
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Flushes `tally` every [`FLUSH_EVERY`], and once more when the process stops.
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
        if let Err(e) = tally.flush(&db).await {
            tracing::warn!("report tally: the last flush failed: {e}");
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
        t.gate_took(7, Duration::from_micros(150));
        let c = mem::take(&mut *t.lock());
        let per = |v: i64, o: Outcome| {
            c.refusals.iter().filter(|((cv, _, co), _)| *cv == v && *co == o).map(|(_, n)| n).sum::<i64>()
        };
        assert_eq!((per(7, Outcome::SoldOut), per(7, Outcome::Granted), per(8, Outcome::Shed)), (2, 0, 1));
        assert_eq!(c.latency.get(&(7, 1)), Some(&1));
    }
}
