//! The sale's upkeep, a round every sweep period in every process: finishes stock
//! changes whose caller died between the database and Redis (`sale::stock`), and
//! pushes each sale's window to Redis once per version of its row this process has
//! not pushed yet. An operator's change reaches the gate before its call answers;
//! this catches the change whose push failed (Redis down a moment), and brings a
//! Redis that came back from an older snapshot up to the database's rows. The version
//! in the window makes every push safe: an older row never overwrites a newer one.

use super::{stock, warm};
use crate::{
    backend::{layout::DRAIN_GRACE_MS, Backend, BackendError},
    shutdown::{self, Shutdown},
    voucher::store as vouchers,
};
use std::{collections::HashMap, time::Duration};

pub fn spawn(backend: Backend, every: Duration, shutdown: Shutdown) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        // Voucher → the version of its row this process last pushed.
        let mut pushed = HashMap::new();
        let mut rounds = shutdown::interval(every);
        while shutdown.tick(&mut rounds).await {
            if let Err(e) = round(&backend, &mut pushed).await {
                tracing::warn!("sale upkeep: {e}; trying again next round");
            }
        }
    })
}

/// One round.
async fn round(backend: &Backend, pushed: &mut HashMap<i64, i64>) -> Result<(), BackendError> {
    stock::finish_owed(backend).await?;
    let live = vouchers::live(&backend.db, DRAIN_GRACE_MS).await?;
    let mut redis = backend.redis.clone();
    for v in &live {
        if pushed.get(&v.id) != Some(&v.version) {
            // Only looks when Redis lost the voucher: a grab or the worker rebuilds it.
            warm::load(backend, &mut redis, &backend.keys(v.id), v, None).await?;
            pushed.insert(v.id, v.version);
        }
    }
    pushed.retain(|id, _| live.iter().any(|v| v.id == *id));
    Ok(())
}
