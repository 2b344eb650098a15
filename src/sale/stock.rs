//! Operators' stock changes in Redis (`lua/stock.lua`): adding units, and withdrawing
//! units nobody was granted, decided in one atomic step beside the gate. The change's
//! row is in the database before Redis is asked (`voucher::store::add_stock`,
//! `owe_withdrawal`), and Redis makes each change once (its id is kept in the sale's
//! `changes` hash), so a change whose caller died half-way is finished by the sweeper
//! ([`finish_owed`]) without being made twice.
//!
//! With replicas required (`SECKILL_WAIT_REPLICAS`), the database records a change only
//! once replicas hold Redis's step: a master that made it and died before replicating
//! it would hand over to one that never made it, while the database counted it (a
//! chaos run isolating a master lost an addition and a withdrawal so). Until then the
//! change stays owed, and the upkeep makes it again wherever the sale is now.

use super::warm;
use crate::{
    backend::{
        db_clock, invoke_then_wait,
        layout::Bucket,
        layout_version::{refused_layout, LAYOUT_VERSION},
        Backend, BackendError, Replicas, ScriptCall,
    },
    bus::SaleEvent,
    voucher::{
        ledger::{self, StockChange},
        store as vouchers,
    },
};
use std::collections::BTreeMap;

/// A change owed this long is taken as abandoned by its caller.
const ABANDONED_AFTER_MS: i64 = 2_000;
/// Owed changes finished per sweeper round at most.
const ROUND: i64 = 100;

/// Makes the change in Redis (once), then records in the database what it made.
/// Returns the units it made as the database records them (0: a withdrawal of more
/// than was unsold, or one a rebuild of the voucher voided) and as Redis answered.
/// A move's withdrawal is followed by its addition to the target bucket, at once.
pub async fn finish(backend: &Backend, change: &StockChange) -> Result<Made, BackendError> {
    let (made, then) = finish_one(backend, change).await?;
    if let Some(addition) = then {
        finish_one(backend, &addition).await?;
    }
    Ok(made)
}

/// [`finish`] for one row: what it made, and the addition a move's withdrawal owes.
async fn finish_one(backend: &Backend, change: &StockChange) -> Result<(Made, Option<StockChange>), BackendError> {
    let mut rebuilt = false;
    let made = match apply(backend, change).await? {
        Some(made) => made,
        None => {
            rebuilt = true;
            // Redis lost the voucher: rebuilt from the database (which counts every
            // addition already), then asked again.
            let row = vouchers::get(&backend.db, change.voucher_id).await?;
            if let Some(row) = row {
                warm::warm(backend, &row).await?;
            }
            // Still not there: the sale's keys expire as they are made (it ended
            // longer ago than the drain grace). An addition stands in the database;
            // a withdrawal finds nothing left to take.
            apply(backend, change).await?.unwrap_or(if change.units > 0 { change.units } else { 0 })
        }
    };
    let settled = ledger::settle_change(&backend.db, change, made).await?;
    Ok((Made { recorded: settled.made, redis: made, rebuilt }, settled.then))
}

/// What a stock change made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Made {
    /// As the database records it: what counts.
    pub recorded: i64,
    /// As Redis answered this call (it differs when a rebuild voided a withdrawal).
    pub redis: i64,
    /// Redis did not hold the sale, and it was rebuilt for the change: a rebuild voids
    /// every withdrawal it finds owed, this one too, so nothing was withdrawn whatever
    /// was unsold.
    pub rebuilt: bool,
}

/// Runs `lua/stock.lua` on the change's bucket and, in the same pipeline, waits for
/// the replicas required to hold it: the units the change made, or `None` when Redis
/// does not hold the bucket. A move's addition tells nobody (the sale was not sold
/// out: units only move to a bucket that ran dry while others held some).
/// Fails when the replicas fall short (the change stays owed). On the connection of
/// the waits (`Backend::waits`): grabs never queue behind one.
async fn apply(backend: &Backend, change: &StockChange) -> Result<Option<i64>, BackendError> {
    let shards = crate::voucher::buckets::of(backend, change.voucher_id).await?;
    let keys = backend.bucket_keys(Bucket { voucher_id: change.voucher_id, shards, bucket: change.bucket() });
    let restocked = match change.move_from {
        Some(_) => String::new(),
        None => SaleEvent::Restocked { voucher_id: change.voucher_id }.encode(),
    };
    let keys = [keys.left.as_str(), &keys.changes, &keys.window];
    let mut call = ScriptCall::new(&backend.scripts.stock, &keys, 5, 64 + backend.events_channel.len());
    call.arg(change.id).arg(change.units).arg(&*backend.events_channel).arg(restocked).arg(LAYOUT_VERSION);
    let Replicas { want, wait_ms } = backend.replicas;
    let (mut made, have): (Vec<Option<i64>>, u32) =
        invoke_then_wait(&[call], &mut backend.waits.clone(), want, wait_ms).await.inspect_err(|e| {
            if let Some(theirs) = refused_layout(e) {
                backend.newer_layouts.met(change.voucher_id, theirs);
            }
        })?;
    if have < want {
        return Err(BackendError::ReplicasBehind { have, want });
    }
    Ok(made.pop().flatten())
}

/// Finishes the changes whose callers died between the database and Redis (an
/// upkeep round): at most [`ROUND`] of them, from past the id `after` (the next round
/// reads on past these, and from the start again once it reached the end), each
/// sale's in order and the sales side by side. One that fails is logged, and its
/// sale's later ones wait for the next time round. So changes that keep failing (a
/// node down, cut off or failing over) hold up neither the other sales' nor the rounds
/// after (a review, 2026-12-02: a hundred of them, tried one after another, seconds
/// each, were the whole of every round, and no other sale's change was ever reached).
/// Returns how many it finished.
pub async fn finish_owed(backend: &Backend, after: &mut i64) -> Result<usize, BackendError> {
    // The database's clock, as the changes are dated by (`voucher::ledger`): a process
    // whose clock runs slow must not leave others' abandoned changes owed meanwhile.
    let before = db_clock::now_ms(&backend.db).await? - ABANDONED_AFTER_MS;
    let owed = ledger::owed_changes(&backend.db, before, *after, ROUND).await?;
    *after = crate::backend::next_round_after(owed.last().map(|c| c.id), owed.len(), ROUND);
    let mut of_sales: BTreeMap<i64, Vec<&StockChange>> = BTreeMap::new();
    for change in &owed {
        of_sales.entry(change.voucher_id).or_default().push(change);
    }
    let sales = of_sales.into_values().map(|changes| async move {
        let mut finished = 0;
        for change in changes {
            if let Err(e) = finish(backend, change).await {
                tracing::warn!(change = change.id, voucher = change.voucher_id, "owed stock change: {e}");
                break;
            }
            finished += 1;
        }
        finished
    });
    Ok(futures::future::join_all(sales).await.into_iter().sum())
}
