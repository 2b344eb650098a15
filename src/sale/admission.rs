//! Admission control in front of the gate: past what the box can serve, a grab is
//! answered `unavailable` at once (503, `Retry-After: 1`) instead of joining a queue
//! that grows until every client times out. A grab is shed when this process already
//! has `max_in_flight` grabs at the gate, or when the gate has turned slow (its
//! latency, averaged over recent grabs, past `slow`) while a quarter of that many are
//! in flight. The first bounds the queue, so the latency of admitted grabs stays near
//! what it is at capacity; the second sheds before the queue fills when Redis itself
//! slows. Admitted grabs are decided as always: none is lost, none answered twice.

use std::{
    sync::atomic::{AtomicU64, AtomicUsize, Ordering},
    time::{Duration, Instant},
};

pub struct Admission {
    max_in_flight: usize,
    slow_us: u64,
    in_flight: AtomicUsize,
    /// Recent gate latency (µs), an exponentially weighted average.
    latency_us: AtomicU64,
    admitted: AtomicU64,
    shed: AtomicU64,
}

/// A grab let through; it leaves (and its latency is counted) when dropped.
pub struct Permit<'a> {
    admission: &'a Admission,
    started: Instant,
}

impl Admission {
    pub fn new(max_in_flight: usize, slow: Duration) -> Self {
        Self {
            max_in_flight: max_in_flight.max(1),
            slow_us: slow.as_micros() as u64,
            in_flight: AtomicUsize::new(0),
            latency_us: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
            shed: AtomicU64::new(0),
        }
    }

    /// A permit, or `None`: shed.
    pub fn try_admit(&self) -> Option<Permit<'_>> {
        let now = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        let slow = self.latency_us.load(Ordering::Relaxed) > self.slow_us;
        // A slow gate sheds past a quarter of the cap, but always lets one grab through
        // when none is in flight: it measures the gate again, so the average can fall.
        if now > self.max_in_flight || (slow && now > (self.max_in_flight / 4).max(1)) {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            self.shed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        self.admitted.fetch_add(1, Ordering::Relaxed);
        Some(Permit { admission: self, started: Instant::now() })
    }

    /// Grabs admitted and shed since the start (for the live board's rates).
    pub fn counts(&self) -> (u64, u64) {
        (self.admitted.load(Ordering::Relaxed), self.shed.load(Ordering::Relaxed))
    }
}

impl Permit<'_> {
    /// When the grab was let through.
    pub fn started(&self) -> Instant {
        self.started
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let took = self.started.elapsed().as_micros() as u64;
        // An average over about the last eight grabs; racing updates lose a sample,
        // which an average can afford.
        let before = self.admission.latency_us.load(Ordering::Relaxed);
        let average = before - before / 8 + took / 8;
        // The last grab leaving forgets the average: the next burst measures the gate
        // afresh. Else the slow tail of one storm (grabs waiting on units moved between
        // buckets) shed the first grabs of the next, seconds later, at a quarter of the
        // cap (1,023 of 150,000 in the 16-core bench) however fast the gate had become.
        let last = self.admission.in_flight.fetch_sub(1, Ordering::AcqRel) == 1;
        self.admission.latency_us.store(if last { 0 } else { average }, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sheds_past_the_cap_and_admits_again_once_one_leaves() {
        let a = Admission::new(2, Duration::from_secs(1));
        let (one, two) = (a.try_admit(), a.try_admit());
        assert!(one.is_some() && two.is_some());
        assert!(a.try_admit().is_none(), "a third is shed");
        drop(one);
        assert!(a.try_admit().is_some(), "room again");
        assert_eq!(a.counts(), (3, 1));
    }

    #[test]
    fn a_slow_gate_sheds_at_a_quarter_of_the_cap() {
        let a = Admission::new(8, Duration::from_millis(5));
        a.latency_us.store(50_000, Ordering::Relaxed);
        let held: Vec<_> = (0..2).map(|_| a.try_admit().expect("two of eight")).collect();
        assert!(a.try_admit().is_none(), "a slow gate with a quarter of the cap in flight sheds");
        drop(held);
        assert!(a.try_admit().is_some(), "nothing in flight: a grab goes through and measures the gate again");
    }

    #[test]
    fn a_gate_seen_slow_is_measured_afresh_once_nothing_is_in_flight() {
        let a = Admission::new(8, Duration::from_millis(5));
        a.latency_us.store(50_000, Ordering::Relaxed);
        drop(a.try_admit().expect("none in flight: admitted"));
        let burst: Vec<_> = (0..8).filter_map(|_| a.try_admit()).collect();
        assert_eq!(burst.len(), 8, "the next burst is admitted up to the cap, not a quarter of it");
    }

    #[test]
    fn a_slow_gate_under_a_cap_of_one_still_admits_one_at_a_time() {
        let a = Admission::new(1, Duration::from_millis(5));
        a.latency_us.store(50_000, Ordering::Relaxed);
        let one = a.try_admit().expect("none in flight: admitted");
        assert!(a.try_admit().is_none());
        drop(one);
        assert!(a.try_admit().is_some(), "never shed for good");
    }
}
