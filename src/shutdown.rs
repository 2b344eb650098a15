//! The one stop signal. Start-up holds the [`Trigger`]; every long-lived task (HTTP,
//! live feeds, the worker's readers, the sampler, the event listener) holds a
//! [`Shutdown`] and winds down when it fires, as in mini-redis.

use std::future::Future;
use tokio::sync::watch;

/// A new signal: the trigger that fires it and a listener to clone for each task.
pub fn channel() -> (Trigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (Trigger(tx), Shutdown(rx))
}

/// Fires the stop signal.
#[derive(Debug)]
pub struct Trigger(watch::Sender<bool>);

impl Trigger {
    pub fn fire(&self) {
        self.0.send_replace(true);
    }
}

/// Listens for the stop signal. Cheap to clone; a dropped trigger counts as fired.
#[derive(Clone, Debug)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// True once the signal fired.
    pub fn is_shutdown(&self) -> bool {
        *self.0.borrow() || self.0.has_changed().is_err()
    }

    /// Resolves when the signal fires (at once if it already did). The future owns
    /// what it needs, so it can be handed to `select!`, `take_until` or axum.
    pub fn wait(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.0.clone();
        async move {
            let _ = rx.wait_for(|fired| *fired).await;
        }
    }

    /// Waits for `interval`'s next tick: true, or false once the signal fired. The loop
    /// of every periodic task (`while shutdown.tick(&mut every).await { … }`).
    pub async fn tick(&self, interval: &mut tokio::time::Interval) -> bool {
        tokio::select! {
            _ = interval.tick() => !self.is_shutdown(),
            () = self.wait() => false,
        }
    }
}

/// An interval for [`Shutdown::tick`] whose rounds, when one overruns, skip the ticks
/// they missed rather than bunching up.
pub fn interval(period: std::time::Duration) -> tokio::time::Interval {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    interval
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_listener_sees_the_signal_once_fired() {
        let (trigger, shutdown) = channel();
        let other = shutdown.clone();
        assert!(!shutdown.is_shutdown());
        let waiting = tokio::spawn(other.wait());
        trigger.fire();
        waiting.await.unwrap();
        assert!(shutdown.is_shutdown());
        shutdown.wait().await;
        let (trigger, shutdown) = channel();
        drop(trigger);
        assert!(shutdown.is_shutdown(), "a dropped trigger stops everything too");
    }

    #[tokio::test]
    async fn a_periodic_task_ticks_until_the_signal_fires() {
        let (trigger, shutdown) = channel();
        let mut every = interval(std::time::Duration::from_millis(1));
        assert!(shutdown.tick(&mut every).await);
        assert!(shutdown.tick(&mut every).await);
        trigger.fire();
        assert!(!shutdown.tick(&mut every).await, "no round after the signal");
    }
}
