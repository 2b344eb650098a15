//! The sweeper: every server process runs one. Each round it cancels unpaid orders
//! whose payment deadline has passed, and finishes give-backs Redis still owes
//! (a canceller that died between the database and Redis), striking each debt once
//! Redis holds the give-back for good (`give_back`), and settles the orders of a
//! worker that died between the database and Redis after a rebuild (`unsettled`).
//! The deadline lives in the database, so a restart forgets nothing; each cancel is
//! one conditional update, so any number of sweepers cancel each order once.

use super::{give_back::give_back_durably, lifecycle, unsettled, CancelReason};
use crate::{
    backend::{db_clock, outage::Outage, Backend, BackendError},
    shutdown::{self, Shutdown},
};
use std::time::Duration;

/// Orders handled per round at most; the next round goes on.
const ROUND: i64 = 500;
/// A give-back owed for this long is taken as abandoned by its canceller (or, with
/// replicas required, as waiting for the sweeper to see it on them); a batch on record
/// as unsettled, by its worker.
const ABANDONED_AFTER_MS: i64 = 2_000;

pub fn spawn(backend: Backend, every: Duration, shutdown: Shutdown) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        // The first round, like every other, comes a period after the last (here: the
        // start). A period of an hour means no round for an hour, which the tests of
        // deadlines nobody sweeps rely on; at start-up the other processes sweep.
        let mut rounds = shutdown::interval(every);
        rounds.reset();
        let mut outage = Outage::default();
        let mut cursors = Cursors::default();
        while shutdown.tick(&mut rounds).await {
            let swept = sweep(&backend, &mut cursors).await;
            outage.note(&"sweeper", &swept);
        }
    })
}

/// Where a round reads on from in the lists of owed work it pages through, `ROUND`
/// rows at a time (`backend::next_round_after`): the debts of give-backs, and the
/// batches on record as unsettled. A sale whose Redis node is down keeps its rows
/// owed, and the next round reads past them (a review, 2026-12-02: read oldest first,
/// a sale's 500 debts that kept failing were all any round reached, and a debt of
/// another sale behind them was never given back).
#[derive(Debug, Default)]
pub struct Cursors {
    owed: i64,
    unsettled: i64,
}

/// One round. Returns how many orders it cancelled for their deadline.
pub async fn sweep(backend: &Backend, cursors: &mut Cursors) -> Result<usize, BackendError> {
    // The database's clock, not this process's: the one every process sweeps by.
    let now = db_clock::now_ms(&backend.db).await?;
    let mut cancelled = Vec::new();
    for order in lifecycle::overdue(&backend.db, now, ROUND).await? {
        // Another sweeper, the shopper or a payment may have got there first.
        if let Some(owed) = lifecycle::cancel(&backend.db, order, None, CancelReason::Timeout, now).await? {
            cancelled.push(owed);
        }
    }
    // Each step runs whatever an earlier one met (a sale whose Redis node is down must
    // not hold back the others'); the first failure is answered at the end.
    let gave = give_back_durably(backend, &cancelled).await;
    let owed = match lifecycle::owed(&backend.db, now - ABANDONED_AFTER_MS, (cursors.owed, ROUND)).await {
        Ok(owed) => {
            cursors.owed = crate::backend::next_round_after(owed.last().map(|o| o.order_id), owed.len(), ROUND);
            give_back_durably(backend, &owed).await
        }
        Err(e) => Err(e.into()),
    };
    let settled = unsettled::settle_abandoned(backend, now - ABANDONED_AFTER_MS, (&mut cursors.unsettled, ROUND)).await;
    gave?;
    owed?;
    settled?;
    Ok(cancelled.len())
}
