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
    backend::{
        invoke_then_wait,
        layout::{bucket_of, Bucket, SaleKeys},
        Backend, BackendError, Replicas, ScriptCall,
    },
    bus::SaleEvent,
    voucher::buckets,
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
/// hold them: one pipeline per voucher (per bucket of a sale of several shards: each
/// on its own node), its give-backs and a `WAIT` on one connection
/// (`backend`'s, which must be one no grab waits behind), so the `WAIT` counts those
/// very writes on the master that made them. A voucher whose replicas fall short keeps
/// its debts for the next round, as does one whose give-backs fail (a node down): the
/// others go on, side by side, and the first failure is answered once they are done.
/// Returns how many were given back now (not before).
pub async fn give_back_durably(backend: &Backend, owed: &[Owed]) -> Result<usize, BackendError> {
    let mut by_bucket: BTreeMap<Bucket, Vec<&Owed>> = BTreeMap::new();
    for o in owed {
        let shards = buckets::of(backend, o.voucher_id).await?;
        let bucket = Bucket { voucher_id: o.voucher_id, shards, bucket: bucket_of(o.user_id, shards) };
        by_bucket.entry(bucket).or_default().push(o);
    }
    // Side by side: a bucket whose node does not answer costs its timeout once.
    let buckets = by_bucket.iter().map(|(bucket, owed)| give_back_bucket(backend, *bucket, owed));
    let (mut acted, mut failed) = (0, None);
    for done in futures::future::join_all(buckets).await {
        match done {
            Ok(now) => acted += now,
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    failed.map_or(Ok(acted), Err)
}

/// [`give_back_durably`] for the debts of one bucket.
async fn give_back_bucket(backend: &Backend, bucket: Bucket, owed: &[&Owed]) -> Result<usize, BackendError> {
    let (voucher_id, keys) = (bucket.voucher_id, backend.bucket_keys(bucket));
    let calls: Vec<ScriptCall> = owed.iter().map(|o| call(backend, &keys, o)).collect();
    let Replicas { want, wait_ms } = backend.replicas;
    let (acts, have): (Vec<i64>, u32) = invoke_then_wait(&calls, &mut backend.redis.clone(), want, wait_ms).await?;
    if have < want {
        tracing::warn!(voucher_id, have, want, "give-backs not on replicas yet: kept owed");
    } else {
        for o in owed {
            lifecycle::settled(&backend.db, o.order_id).await?;
        }
    }
    Ok(acts.iter().filter(|a| **a == 1).count())
}

/// The script, in the order's shopper's bucket: true when it gave the unit back now.
async fn run_script(backend: &Backend, owed: &Owed) -> Result<bool, BackendError> {
    let keys = buckets::user_keys(backend, owed.voucher_id, owed.user_id).await?;
    let acted: i64 = call(backend, &keys, owed).invoke(&mut backend.redis.clone()).await?;
    Ok(acted == 1)
}

/// The script's call for one order.
fn call<'a>(backend: &'a Backend, keys: &SaleKeys, owed: &Owed) -> ScriptCall<'a> {
    let keys = [keys.left.as_str(), &keys.buyers, &keys.given_back, &keys.window];
    let mut call = ScriptCall::new(&backend.scripts.give_back, &keys, 4, 96 + backend.events_channel.len());
    call.arg(owed.order_id)
        .arg(owed.user_id)
        .arg(&*backend.events_channel)
        .arg(SaleEvent::Restocked { voucher_id: owed.voucher_id }.encode());
    call
}
