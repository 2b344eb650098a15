//! How a background task logs a store it cannot reach: the first failure of a run at
//! once, then at most every [`SAY_AGAIN_AFTER`] while it lasts, and its end. A store
//! down for minutes is then a line a task every half minute, not one a second.

use std::{
    fmt::Display,
    sync::atomic::{AtomicI64, AtomicU64, Ordering},
    time::{Duration, Instant},
};

/// While failures go on, they are said again at most this often.
pub const SAY_AGAIN_AFTER: Duration = Duration::from_secs(30);

/// One task's run of failures, if one is under way: since when, and when last said.
#[derive(Debug, Default)]
pub struct Outage(Option<(Instant, Instant)>);

impl Outage {
    /// A failure: logged (as `what: error`) when it starts a run, or when the run was
    /// last said [`SAY_AGAIN_AFTER`] ago.
    pub fn failed(&mut self, what: &dyn Display, error: &dyn Display) {
        let now = Instant::now();
        match &mut self.0 {
            None => {
                tracing::warn!("{what}: {error}");
                self.0 = Some((now, now));
            }
            Some((since, said)) if now.duration_since(*said) >= SAY_AGAIN_AFTER => {
                tracing::warn!("{what}: {error} (failing for {:?})", now.duration_since(*since));
                *said = now;
            }
            Some(_) => {}
        }
    }

    /// A step's result: a failure, or a success that ends a run of them.
    pub fn note<T, E: Display>(&mut self, what: &dyn Display, result: &Result<T, E>) {
        match result {
            Ok(_) => self.ended(what),
            Err(e) => self.failed(what, e),
        }
    }

    /// A success: ends the run, if one was under way, and says how long it lasted.
    pub fn ended(&mut self, what: &dyn Display) {
        if let Some((since, _)) = self.0.take() {
            tracing::info!("{what}: working again after {:?}", since.elapsed());
        }
    }
}

/// The logs of a path every request may take while a store is down (a grab, any call
/// answered `unavailable`): at most one a second, saying how many were left out.
#[derive(Debug, Default)]
pub struct Throttle {
    /// When the next may be said (Unix ms).
    next_ms: AtomicI64,
    left_out: AtomicU64,
}

impl Throttle {
    pub const fn new() -> Self {
        Self { next_ms: AtomicI64::new(0), left_out: AtomicU64::new(0) }
    }

    /// `Some(how many were left out since the last)` when this one is to be said.
    pub fn allow(&self) -> Option<u64> {
        let now = chrono::Utc::now().timestamp_millis();
        let next = self.next_ms.load(Ordering::Relaxed);
        if now >= next && self.next_ms.compare_exchange(next, now + 1_000, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            return Some(self.left_out.swap(0, Ordering::Relaxed));
        }
        self.left_out.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// A log filter: the Redis client's own logs of nodes it cannot reach (a cluster node
/// down: one a connection attempt, hundreds a second), let through at most once a
/// second; every other event as it is.
pub struct ClientLogs;

impl<S> tracing_subscriber::layer::Filter<S> for ClientLogs {
    fn enabled(&self, _meta: &tracing::Metadata<'_>, _cx: &tracing_subscriber::layer::Context<'_, S>) -> bool {
        true
    }

    fn event_enabled(&self, event: &tracing::Event<'_>, _cx: &tracing_subscriber::layer::Context<'_, S>) -> bool {
        use tracing_log::NormalizeEvent;
        static SAID: Throttle = Throttle::new();
        // The client logs through `log`: its own target is in the normalized metadata.
        let normalized = event.normalized_metadata();
        let target = normalized.as_ref().map_or(event.metadata().target(), |m| m.target());
        !target.starts_with("redis::cluster") || SAID.allow().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_failures_starts_and_ends() {
        let mut outage = Outage::default();
        assert!(outage.0.is_none());
        outage.failed(&"worker", &"refused");
        outage.failed(&"worker", &"refused");
        assert!(outage.0.is_some());
        outage.ended(&"worker");
        assert!(outage.0.is_none());
    }

    #[test]
    fn the_redis_clients_logs_are_let_through_once_a_second() {
        use std::sync::{atomic::AtomicUsize, Arc};
        use tracing_subscriber::{layer::SubscriberExt, Layer};
        struct Count(Arc<AtomicUsize>);
        impl<S: tracing::Subscriber> Layer<S> for Count {
            fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let seen = Arc::new(AtomicUsize::new(0));
        let subscriber = tracing_subscriber::registry().with(Count(seen.clone()).with_filter(ClientLogs));
        tracing::subscriber::with_default(subscriber, || {
            for _ in 0..100 {
                tracing::warn!(target: "redis::cluster_handling::async_connection", "Failed to connect to node");
                tracing::warn!(target: "seckill::worker", "said each time");
            }
        });
        // Every one of ours, and of the client's a hundred, one a second: one here (a
        // few should the machine stall this thread for seconds).
        let seen = seen.load(Ordering::Relaxed);
        assert!((101..=110).contains(&seen), "{seen}");
    }

    #[test]
    fn a_throttle_says_one_a_second_and_counts_the_rest() {
        let throttle = Throttle::new();
        assert_eq!(throttle.allow(), Some(0));
        assert_eq!((throttle.allow(), throttle.allow()), (None, None));
        throttle.next_ms.store(0, Ordering::Relaxed);
        assert_eq!(throttle.allow(), Some(2), "the two left out");
    }
}
