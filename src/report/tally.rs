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
//! grants are not counted here and lose nothing (the orders are their record).
//!
//! **Bounded whatever callers send.** A grab names any voucher id it likes, answered or
//! not (a rate limit answers before anything looks the sale up). So only sales that
//! exist are counted, and only within their window give or take [`GRACE_SECS`]: each
//! flush reads the windows of the sales it counted ([`Windows`]); counts of a sale not
//! known yet are held for at most [`MAX_UNVERIFIED`] sales until the flush checks them,
//! so ids made up by the thousand take those places, never the counts of a real sale
//! already known. At most [`MAX_KEYS`] counts are held between flushes.

use super::{latency_bin, store, Outcome};
use crate::{
    backend::Db,
    shutdown::{self, Shutdown},
};
use std::{
    collections::{HashMap, HashSet},
    mem,
    sync::{Arc, Mutex},
    time::Duration,
};

/// How often each process adds its counts to the database.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// Most counts held between two flushes: a live sale needs a few dozen a second (one
/// per answer code, and one per latency bin seen).
pub const MAX_KEYS: usize = 4_096;
/// Most sales not known yet whose counts are held until the next flush checks them.
pub const MAX_UNVERIFIED: usize = 64;
/// How long before a sale's start and after its end its refusals are still counted
/// (shoppers pressing early, or late).
pub const GRACE_SECS: i64 = 600;

#[derive(Default)]
pub struct Tally {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    counts: Counts,
    windows: Windows,
}

/// Counts not yet in the database.
#[derive(Default)]
pub struct Counts {
    pub refusals: store::Refusals,
    pub latency: store::Latencies,
}

/// The sales this process counts for: each known sale's seconds that count (its window
/// and the grace, Unix seconds), and the sales seen since the last flush that it does
/// not know yet.
#[derive(Default)]
pub struct Windows {
    known: HashMap<i64, (i64, i64)>,
    unverified: HashSet<i64>,
}

impl Windows {
    /// Whether a count of `voucher_id` at `second` is kept (a sale not known yet is, if
    /// there is room: the flush checks it).
    fn admits(&mut self, voucher_id: i64, second: i64) -> bool {
        if self.known.get(&voucher_id).is_some_and(|&(from, to)| (from..=to).contains(&second)) {
            return true;
        }
        // Not known, or outside the window known (which may have moved): the flush
        // looks it up again.
        self.unverified.contains(&voucher_id)
            || (self.unverified.len() < MAX_UNVERIFIED && self.unverified.insert(voucher_id))
    }

    /// As [`Windows::admits`], for a sale the gate itself answered for: it exists, so
    /// it is held for the flush whatever made-up ids took the places.
    fn admits_real(&mut self, voucher_id: i64, second: i64) -> bool {
        self.admits(voucher_id, second) || self.unverified.insert(voucher_id)
    }

    /// Every sale to look up at a flush: those known (their window may have moved) and
    /// those seen.
    fn to_read(&self) -> Vec<i64> {
        self.known.keys().chain(&self.unverified).copied().collect()
    }

    /// Takes the windows read (sales in `asked` but not in `found` do not exist, or no
    /// longer): what is known from now on. Sales whose counting ended a day ago are
    /// forgotten (one coming back is looked up again).
    fn learn(&mut self, asked: &[i64], found: &HashMap<i64, (i64, i64)>, now: i64) {
        for id in asked {
            self.unverified.remove(id);
            match found.get(id) {
                Some(&(begins_ms, ends_ms)) if ends_ms / 1000 + GRACE_SECS + 86_400 > now => {
                    self.known.insert(*id, (begins_ms / 1000 - GRACE_SECS, ends_ms / 1000 + GRACE_SECS));
                }
                _ => {
                    self.known.remove(id);
                }
            }
        }
    }

    /// Keeps of `counts` what belongs to known sales, within their seconds.
    fn keep_known(&self, counts: &mut Counts) {
        let within = |v: &i64, second: Option<i64>| {
            self.known.get(v).is_some_and(|&(from, to)| second.is_none_or(|s| (from..=to).contains(&s)))
        };
        counts.refusals.retain(|(v, second, _), _| within(v, Some(*second)));
        counts.latency.retain(|(v, _), _| within(v, None));
    }
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
        let key = (voucher_id, latency_bin(took.as_micros() as u64));
        if let Some(n) = self.latency.get_mut(&key) {
            *n += 1;
        } else if !self.is_full() {
            self.latency.insert(key, 1);
        }
    }

    /// Adds counts a failed flush took back, within the cap: a count whose key is
    /// not held already is dropped once [`MAX_KEYS`] are (while the database fails,
    /// every round would otherwise bring up to that many more).
    fn add(&mut self, other: Counts) {
        let mut dropped = 0u64;
        for (k, n) in other.refusals {
            if let Some(held) = self.refusals.get_mut(&k) {
                *held += n;
            } else if !self.is_full() {
                self.refusals.insert(k, n);
            } else {
                dropped += 1;
            }
        }
        for (k, n) in other.latency {
            if let Some(held) = self.latency.get_mut(&k) {
                *held += n;
            } else if !self.is_full() {
                self.latency.insert(k, n);
            } else {
                dropped += 1;
            }
        }
        if dropped > 0 {
            tracing::warn!(dropped, "report tally: counts past the cap dropped while the database fails");
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
            let mut state = self.lock();
            if state.windows.admits(voucher_id, second) {
                state.counts.refused(voucher_id, second, outcome);
            }
        }
    }

    /// A grab of `voucher_id` the gate took `took` to answer, with `outcome` (none:
    /// not a sale's answer, as an unknown voucher, and not counted): one lock for both
    /// counts.
    pub fn decided(&self, voucher_id: i64, outcome: Option<Outcome>, took: Duration) {
        let Some(outcome) = outcome else { return };
        let second = chrono::Utc::now().timestamp();
        let mut state = self.lock();
        // `unavailable` is answered for any id while Redis is away; any other answer
        // of the gate's is a real sale's.
        let admitted = if outcome == Outcome::Unavailable {
            state.windows.admits(voucher_id, second)
        } else {
            state.windows.admits_real(voucher_id, second)
        };
        if !admitted {
            return;
        }
        state.counts.took(voucher_id, took);
        if outcome != Outcome::Granted {
            state.counts.refused(voucher_id, second, outcome);
        }
    }

    /// Adds what was counted to the database; on failure keeps it for the next flush.
    /// The sales counted are looked up first (see the module's doc). The work runs in a
    /// task of its own, so a caller that goes away mid-write (a report request dropped)
    /// loses nothing.
    pub async fn flush(self: &Arc<Self>, db: &Db) -> sqlx::Result<()> {
        let (mut taken, asked) = {
            let mut state = self.lock();
            (mem::take(&mut state.counts), state.windows.to_read())
        };
        if taken.is_empty() {
            return Ok(());
        }
        let (tally, db) = (self.clone(), db.clone());
        let write = tokio::spawn(async move {
            let written = async {
                let found = store::windows(&db, &asked).await?;
                tally.lock().windows.learn(&asked, &found, chrono::Utc::now().timestamp());
                tally.lock().windows.keep_known(&mut taken);
                if taken.is_empty() {
                    return Ok(());
                }
                store::add_counts(&db, &taken.refusals, &taken.latency).await
            }
            .await;
            if written.is_err() {
                tally.lock().counts.add(taken);
            }
            written
        });
        write.await.unwrap_or_else(|e| Err(sqlx::Error::Protocol(format!("report tally: {e}"))))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while counting leaves the counts whole: go on with them.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_refusals_by_sale_second_and_code_and_latency_by_bin() {
        let t = Tally::default();
        t.answered(7, Outcome::SoldOut);
        t.answered(7, Outcome::SoldOut);
        t.answered(7, Outcome::Granted);
        t.answered(8, Outcome::Shed);
        t.decided(7, Some(Outcome::SoldOut), Duration::from_micros(150));
        t.decided(9, None, Duration::from_micros(150));
        let c = mem::take(&mut t.lock().counts);
        let per = |v: i64, o: Outcome| {
            c.refusals.iter().filter(|((cv, _, co), _)| *cv == v && *co == o).map(|(_, n)| n).sum::<i64>()
        };
        assert_eq!((per(7, Outcome::SoldOut), per(7, Outcome::Granted), per(8, Outcome::Shed)), (3, 0, 1));
        assert_eq!(c.latency.get(&(7, 1)), Some(&1));
        assert!(c.latency.keys().all(|(v, _)| *v != 9), "no sale's answer, no count");
    }

    /// Counts a failed flush takes back stay within the cap, however many rounds fail:
    /// before, each failed round merged back up to [`MAX_KEYS`] more (the review of
    /// 2026-11-29).
    #[test]
    fn counts_taken_back_after_failed_flushes_stay_within_the_cap() {
        let mut held = Counts::default();
        for round in 0..3_i64 {
            let mut counted = Counts::default();
            for second in 0..MAX_KEYS as i64 {
                counted.refused(7, round * 1_000_000 + second, Outcome::SoldOut);
            }
            held.add(counted);
            assert!(held.refusals.len() + held.latency.len() <= MAX_KEYS, "round {round}");
        }
        let mut again = Counts::default();
        again.refused(7, 0, Outcome::SoldOut);
        held.add(again);
        assert_eq!(held.refusals.get(&(7, 0, Outcome::SoldOut)), Some(&2), "a key held adds up");
    }

    #[test]
    fn made_up_sales_take_a_bounded_number_of_places_never_a_known_sales() {
        let t = Tally::default();
        let now = chrono::Utc::now().timestamp();
        let (begins, ends) = ((now - 60) * 1000, (now + 60) * 1000);
        t.lock().windows.learn(&[7], &[(7, (begins, ends))].into(), now);
        for voucher in 1_000..(1_000 + MAX_KEYS as i64) {
            t.answered(voucher, Outcome::RateLimited);
        }
        t.answered(7, Outcome::RateLimited);
        let state = t.lock();
        let made_up = state.counts.refusals.keys().filter(|(v, _, _)| *v != 7).count();
        assert_eq!(made_up, MAX_UNVERIFIED, "only so many sales not known yet are held");
        assert!(state.counts.refusals.keys().any(|(v, _, _)| *v == 7), "the known sale is counted");
        drop(state);
        // A new sale the gate answered for is held whatever took the places.
        t.decided(8, Some(Outcome::SoldOut), Duration::from_micros(100));
        assert!(t.lock().counts.refusals.keys().any(|(v, _, _)| *v == 8), "a real sale is counted");
    }

    #[test]
    fn only_sales_that_exist_within_their_window_and_grace_are_kept() {
        let mut windows = Windows::default();
        let now = chrono::Utc::now().timestamp();
        let mut counts = Counts::default();
        for (v, second) in [(7, now), (7, now + 3 * 3600), (8, now), (9, now)] {
            assert!(windows.admits(v, second), "not known yet: held for the flush");
            counts.refused(v, second, Outcome::Ended);
        }
        // 7 runs now; 8 ended an hour ago (past its grace); 9 does not exist.
        let found = [(7, ((now - 60) * 1000, (now + 60) * 1000)), (8, ((now - 7200) * 1000, (now - 3600) * 1000))];
        windows.learn(&[7, 8, 9], &found.into(), now);
        windows.keep_known(&mut counts);
        let kept: Vec<(i64, i64)> = counts.refusals.keys().map(|(v, s, _)| (*v, *s)).collect();
        assert_eq!(kept, [(7, now)]);
        // Outside a known window (it may have moved): held for the flush to look up again.
        assert!(windows.admits(7, now + 3 * 3600));
        windows.learn(&[7], &found.into(), now);
        let mut late = Counts::default();
        late.refused(7, now + 3 * 3600, Outcome::Ended);
        windows.keep_known(&mut late);
        assert!(late.is_empty(), "still outside its window: dropped");
    }
}
