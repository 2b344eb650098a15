//! Giving a cancelled order's unit back in Redis (`lua/give_back.lua`), once per order:
//! one more unit left, the buyer slot freed, and the `restock` event published so
//! every process clears its sold-out flag. This module owns the script's interface, and the step that
//! follows a cancel: run the script, then strike the debt from the database once the
//! give-back will survive a failover.
//!
//! With replicas required (`SECKILL_WAIT_REPLICAS`), a give-back only the master
//! holds is lost if the master dies: the new master keeps the unit sold and the
//! shopper's slot taken, and the stock key still exists, so no rebuild repairs it. So
//! the debt (`restocks_owed`) is struck only after replicas hold the give-back (Redis
//! `WAIT`), which only the sweeper does, on a connection of its own (a `WAIT` holds up
//! every command behind it). Until then any sweeper runs the give-back again: on a
//! master that has it, nothing happens; on one that lost it, the unit goes back now.

use super::lifecycle::{self, Owed};
use crate::{
    backend::{Backend, BackendError},
    bus::SaleEvent,
};
use std::collections::BTreeMap;

/// Runs the give-back the database recorded as owed, and strikes the debt unless
/// replicas must hold it first (then the sweeper does, [`give_back_durably`]). Safe to
/// run any number of times, from any process: the script acts once per order.
pub async fn give_back(backend: &Backend, owed: &Owed) -> Result<bool, BackendError> {
    let acted = run_script(backend, owed).await?;
    if backend.replicas.want == 0 {
        lifecycle::settled(&backend.db, owed.order_id).await?;
    }
    Ok(acted)
}

/// Runs the give-backs, then strikes each voucher's debts once its master's replicas
/// hold them (one `WAIT` per voucher, on `backend`'s connection, which must be one no
/// grab waits behind). A voucher whose replicas fall short keeps its debts for the
/// next round. Returns how many were given back now (not before).
pub async fn give_back_durably(backend: &Backend, owed: &[Owed]) -> Result<usize, BackendError> {
    let mut by_voucher: BTreeMap<i64, Vec<&Owed>> = BTreeMap::new();
    for o in owed {
        by_voucher.entry(o.voucher_id).or_default().push(o);
    }
    let mut acted = 0;
    for (voucher_id, owed) in by_voucher {
        for o in &owed {
            acted += usize::from(run_script(backend, o).await?);
        }
        let want = backend.replicas.want;
        if want > 0 {
            let stock = &backend.keys(voucher_id).left;
            let have = backend.redis.clone().wait_for_replicas(stock, want, backend.replicas.wait_ms).await?;
            if have < want {
                tracing::warn!(voucher_id, have, want, "give-backs not on replicas yet: kept owed");
                continue;
            }
        }
        for o in owed {
            lifecycle::settled(&backend.db, o.order_id).await?;
        }
    }
    Ok(acted)
}

/// The script: true when it gave the unit back now.
async fn run_script(backend: &Backend, owed: &Owed) -> Result<bool, BackendError> {
    let keys = backend.keys(owed.voucher_id);
    let acted: i64 = backend
        .scripts
        .give_back
        .key(&keys.left)
        .key(&keys.buyers)
        .key(&keys.restocked)
        .key(&keys.window)
        .arg(owed.order_id)
        .arg(owed.user_id)
        .arg(&*backend.events_channel)
        .arg(SaleEvent::Restocked { voucher_id: owed.voucher_id }.encode())
        .invoke_async(&mut backend.redis.clone())
        .await?;
    Ok(acted == 1)
}
