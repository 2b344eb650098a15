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
}
