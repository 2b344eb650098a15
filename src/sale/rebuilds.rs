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

use crate::error::ErrorCode;
use futures::{
    future::{BoxFuture, Shared},
    FutureExt,
};
use std::{
    collections::HashMap,
    future::Future,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

/// What a rebuild answers the grabs that asked for it.
pub type SharedRebuild = Shared<BoxFuture<'static, ErrorCode>>;

/// The rebuilds under way, by voucher.
#[derive(Default)]
pub struct Rebuilds(Mutex<HashMap<i64, SharedRebuild>>);

impl Rebuilds {
    /// The outcome of the rebuild of `voucher_id` under way, or else of `rebuild`,
    /// started now in a task of its own: it runs to its end even if every grab waiting
    /// for it goes away (so none is left half done, nor kept here), and leaves this
    /// list when it ends.
    pub fn join<F>(self: &Arc<Self>, voucher_id: i64, rebuild: F) -> SharedRebuild
    where
        F: Future<Output = ErrorCode> + Send + 'static,
    {
        let mut running = self.lock();
        if let Some(outcome) = running.get(&voucher_id) {
            return outcome.clone();
        }
        let rebuilds = self.clone();
        // It cannot leave the list before it is in it: that takes the lock held here.
        let task = tokio::spawn(async move {
            let code = rebuild.await;
            rebuilds.lock().remove(&voucher_id);
            code
        });
        let outcome = async move { task.await.unwrap_or(ErrorCode::Unavailable) }.boxed().shared();
        running.insert(voucher_id, outcome.clone());
        outcome
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<i64, SharedRebuild>> {
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
        let rebuilds = Arc::new(Rebuilds::default());
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
        assert_eq!(other.await, ErrorCode::Ended, "another voucher has its own");
        finish.send(()).unwrap();
        assert_eq!((first.await, second.await), (ErrorCode::UnknownVoucher, ErrorCode::UnknownVoucher));
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert!(rebuilds.lock().is_empty(), "an ended rebuild leaves the list");
        assert_eq!(
            rebuilds.join(1, async { ErrorCode::Unavailable }).await,
            ErrorCode::Unavailable,
            "asked again, run again"
        );
    }

    #[tokio::test]
    async fn a_rebuild_every_grab_left_runs_to_its_end() {
        let rebuilds = Arc::new(Rebuilds::default());
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
