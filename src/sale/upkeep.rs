//! The sale's upkeep, a round every sweep period in every process: finishes stock
//! changes whose caller died between the database and Redis (`sale::stock`), and
//! pushes each live sale's window to Redis (one script call per sale). An operator's
//! change reaches the gate before its call answers; this catches the change whose push
//! failed (Redis down a moment), and a window Redis lost or rolled back (a replica
//! that missed the write took over, a restart from an older snapshot) while it kept
//! the stock, which no rebuild would notice. The version in the window makes every
//! push safe: an older row never overwrites a newer one.

use super::{stock, warm};
use crate::{
    backend::{layout::DRAIN_GRACE_MS, outage::Outage, Backend, BackendError},
    shutdown::{self, Shutdown},
    voucher::store as vouchers,
};
use std::time::Duration;

pub fn spawn(backend: Backend, every: Duration, shutdown: Shutdown) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut rounds = shutdown::interval(every);
        let mut outage = Outage::default();
        // Where the next round's owed stock changes are read from (`stock::finish_owed`).
        let mut after = 0;
        while shutdown.tick(&mut rounds).await {
            let kept = round(&backend, &mut after).await;
            outage.note(&"sale upkeep", &kept);
        }
    })
}

/// One round: the stock changes and the windows side by side, so that a change
/// waiting on a node that does not answer holds back no sale's window.
async fn round(backend: &Backend, after: &mut i64) -> Result<(), BackendError> {
    let (finished, pushed) = tokio::join!(stock::finish_owed(backend, after), push_windows(backend));
    finished?;
    pushed
}

/// Pushes each live sale's window.
async fn push_windows(backend: &Backend) -> Result<(), BackendError> {
    let live = vouchers::live(&backend.db, DRAIN_GRACE_MS).await?;
    // Every sale's push runs to its end, whatever the others meet: one Redis node down
    // must not hold back the windows of sales elsewhere.
    let pushes = live.iter().map(|v| warm::push_window(backend, v));
    let pushed: Result<Vec<bool>, _> = futures::future::join_all(pushes).await.into_iter().collect();
    pushed?;
    Ok(())
}
