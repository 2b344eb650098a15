//! Rebuilds of vouchers Redis lost, started by grabs (`grab::not_in_redis`): one per
//! voucher at a time in this process, its outcome shared by every grab that asks
//! while it runs.
//!
//! Every grab that meets the gate's `unknown_voucher` before the rebuild lands would
//! otherwise read the voucher and run a rebuild of its own: each waits for the
//! voucher's lock in the database and reads every buyer for its snapshot, in turn,
//! holding a pooled connection all the while. In a storm that is hundreds of them.
//! Sharing the outcome, not refusing the others, gives each grab the true answer: a
//! burst of grabs for a voucher that does not exist all hear `unknown_voucher`, not
//! one of them that and the rest "try again".

//!
//! The same holds for the moves that refill a bucket of a sale of several shards
//! (`refill`): one per bucket at a time in this process, its outcome shared.

use crate::error::ErrorCode;
use futures::{
    future::{BoxFuture, Shared},
    FutureExt,
};
use std::{
    collections::HashMap,
    future::Future,
    hash::Hash,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

/// What a run answers those that asked for it (`None`: it panicked).
pub type SharedRun<T> = Shared<BoxFuture<'static, Option<T>>>;

/// Runs under way, by what they are for: at most one each, shared by every caller
/// that asks while it runs.
pub struct OneAtATime<K, T>(Mutex<HashMap<K, SharedRun<T>>>);

impl<K, T> Default for OneAtATime<K, T> {
    fn default() -> Self {
        Self(Mutex::default())
    }
}

/// The rebuilds under way, by voucher.
pub type Rebuilds = OneAtATime<i64, ErrorCode>;

impl<K, T> OneAtATime<K, T>
where
    K: Hash + Eq + Copy + Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
{
    /// The outcome of the run for `key` under way, or else of `run`, started now in a
    /// task of its own: it runs to its end even if every caller waiting for it goes
    /// away (so none is left half done, nor kept here), and leaves this list when it
    /// ends.
    pub fn join<F>(self: &Arc<Self>, key: K, run: F) -> SharedRun<T>
    where
        F: Future<Output = T> + Send + 'static,
    {
        let mut running = self.lock();
        if let Some(outcome) = running.get(&key) {
            return outcome.clone();
        }
        let runs = self.clone();
        // It cannot leave the list before it is in it: that takes the lock held here.
        let task = tokio::spawn(async move {
            let outcome = run.await;
            runs.lock().remove(&key);
            outcome
        });
        let outcome = async move { task.await.ok() }.boxed().shared();
        running.insert(key, outcome.clone());
        outcome
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<K, SharedRun<T>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::sync::oneshot;

    #[tokio::test]
    async fn grabs_asking_at_once_share_one_rebuild_and_its_answer() {
        let rebuilds: Arc<Rebuilds> = Arc::default();
        let runs = Arc::new(AtomicUsize::new(0));
        let (finish, finished) = oneshot::channel::<()>();
        let counted = runs.clone();
        let first = rebuilds.join(1, async move {
            counted.fetch_add(1, Ordering::SeqCst);
            let _ = finished.await;
            ErrorCode::UnknownVoucher
        });
        let second = rebuilds.join(1, async { unreachable!("a second rebuild of voucher 1") });
        let other = rebuilds.join(2, async { ErrorCode::Ended });
        assert_eq!(other.await, Some(ErrorCode::Ended), "another voucher has its own");
        finish.send(()).unwrap();
        let unknown = Some(ErrorCode::UnknownVoucher);
        assert_eq!((first.await, second.await), (unknown, unknown));
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert!(rebuilds.lock().is_empty(), "an ended rebuild leaves the list");
        assert_eq!(
            rebuilds.join(1, async { ErrorCode::Unavailable }).await,
            Some(ErrorCode::Unavailable),
            "asked again, run again"
        );
    }

    #[tokio::test]
    async fn a_rebuild_every_grab_left_runs_to_its_end() {
        let rebuilds: Arc<Rebuilds> = Arc::default();
        let (done, ended) = oneshot::channel::<()>();
        drop(rebuilds.join(1, async move {
            let _ = done.send(());
            ErrorCode::UnknownVoucher
        }));
        ended.await.expect("the rebuild ran though nobody waits for it");
        // One thread: the task ran on, without a pause, to its end before this resumed.
        assert!(rebuilds.lock().is_empty(), "and left the list");
    }
}
