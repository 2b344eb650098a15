//! A sale over several shards: its units split over K buckets in Redis, each in its
//! own hash slot (`backend::layout`), so one hot sale is decided by several Redis
//! cores. A shopper belongs to one bucket (a hash of the user id), so one order per
//! shopper stays one atomic check in one bucket, and a bucket's gate call is a sale
//! of one shard's.
//!
//! **No shopper hears "sold out" while a unit is unsold.** When a grab finds its
//! bucket dry (`gate::Verdict::Dry`), units move to it from the bucket holding most,
//! and the grab is asked again ([`refill`]). A move is two stock changes
//! (`sale::stock`): a withdrawal from the source, whose row names its target and is in
//! the database before Redis is asked, and, written when the withdrawal is settled in
//! the same transaction, the addition to the target. Each is made once in Redis (its
//! id in the bucket's `changes`), waits for the replicas required like any stock
//! change, and one a crash left half done is finished by the upkeep (owed rows); a
//! rebuild of a bucket from the database counts the moves its rows record and voids
//! a withdrawal not yet settled. So units are never created or lost by a move, and a
//! move under way is always in the database or in Redis. The sale is sold out when no
//! bucket holds a unit and no change is owed, read twice around that check; then
//! its sold-out event is published (once per process and dry bucket that finds it).
//!
//! **The bound.** A grab waits on a move within its own deadline
//! (`grab::REDIS_DEADLINE`, 2 s): a move is one database row, one Redis step, one
//! database transaction and one more Redis step (a few milliseconds; the test
//! `a_dry_bucket_is_refilled_and_no_grab_hears_sold_out_while_units_are_left` prints
//! it). Past the deadline the grab answers `unavailable`, never `sold_out`.

use super::{rebuilds::OneAtATime, stock, warm};
use crate::{
    backend::{layout::Bucket, outage::Throttle, Backend, BackendError},
    bus::{self, SaleEvent},
    voucher::{ledger, store as vouchers},
};

/// The refills under way in this process, by voucher and bucket.
pub type Refills = OneAtATime<(i64, u32), Refill>;

/// What a refill of a dry bucket found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refill {
    /// The bucket holds units now (moved here, or given back meanwhile): ask again.
    Refilled,
    /// No bucket holds a unit and none is owed: the sale is sold out.
    SoldOut,
    /// A store failed, or grabs kept emptying every source first: `unavailable`.
    Failed,
}

/// Rounds of reading the buckets and moving a refill makes before it gives up (a
/// round is taken again only when grabs emptied its source while it moved).
const ROUNDS: usize = 8;

/// Refills `bucket` of `voucher_id`'s sale of `shards`, or finds the sale sold out.
pub async fn refill(backend: Backend, voucher_id: i64, shards: u32, bucket: u32) -> Refill {
    match try_refill(&backend, voucher_id, shards, bucket).await {
        Ok(Refill::SoldOut) => {
            sold_out(&backend, voucher_id, shards).await;
            Refill::SoldOut
        }
        Ok(found) => found,
        Err(e) => {
            // Every refill fails while a store is down: said at most once a second.
            static SAID: Throttle = Throttle::new();
            if let Some(left_out) = SAID.allow() {
                tracing::warn!(voucher_id, bucket, left_out, "refilling a dry bucket: {e}");
            }
            Refill::Failed
        }
    }
}

async fn try_refill(backend: &Backend, voucher_id: i64, shards: u32, bucket: u32) -> Result<Refill, BackendError> {
    for _ in 0..ROUNDS {
        // What the database owes before the buckets are read (see below).
        let before = ledger::changes_mark(&backend.db, voucher_id).await?;
        let Some(left) = units_left(backend, voucher_id, shards).await? else {
            // A bucket Redis lost: rebuilt from the database, then read again.
            rebuild(backend, voucher_id).await?;
            continue;
        };
        if left[bucket as usize] > 0 {
            return Ok(Refill::Refilled);
        }
        // A change still owed (a move whose replicas fell short, an addition a caller
        // left) is made first, and the buckets read again, before another move takes
        // units out of a bucket (a review, 2026-12-02: with a replica away, each dry
        // grab's move left its units in no bucket and the next moved half of another
        // bucket's, until every bucket read empty).
        if before.0 > 0 {
            for change in &ledger::owed_changes_of(&backend.db, voucher_id).await? {
                stock::finish(backend, change).await?;
            }
            continue;
        }
        let (from, most) =
            left.iter().enumerate().max_by_key(|(_, n)| **n).map(|(b, n)| (b as u32, *n)).unwrap_or((0, 0));
        if most > 0 {
            // Half of what the richest holds: buckets even out in few moves.
            let change = ledger::owe_move(&backend.db, voucher_id, (from, bucket), (most + 1) / 2).await?;
            if stock::finish(backend, &change).await?.recorded != 0 {
                return Ok(Refill::Refilled);
            }
            continue;
        }
        // No bucket showed a unit, but the buckets are read one by one, and a move's
        // units are in neither bucket for a moment ([`none_moving`]). Sold out. Else
        // what is owed is made now (an addition Redis has not made is unsold units
        // too), and the buckets read again.
        if none_moving(before, ledger::changes_mark(&backend.db, voucher_id).await?) {
            return Ok(Refill::SoldOut);
        }
        for change in &ledger::owed_changes_of(&backend.db, voucher_id).await? {
            stock::finish(backend, change).await?;
        }
    }
    Ok(Refill::Failed)
}

/// Rebuilds a sale Redis lost a bucket of, from the database (`sale::warm`).
async fn rebuild(backend: &Backend, voucher_id: i64) -> Result<(), BackendError> {
    if let Some(row) = vouchers::get(&backend.db, voucher_id).await? {
        warm::warm(backend, &row).await?;
    }
    Ok(())
}

/// Whether no unit was moving between buckets while they were read, from the changes
/// owed and the newest change's id read before and after (`changes_mark`). A move is
/// owed from before its units leave one bucket until they are in the other, and its
/// row is written before either: nothing owed before, nothing after, and no change
/// written meanwhile, and none was under way.
fn none_moving(before: (i64, i64), after: (i64, i64)) -> bool {
    before.0 == 0 && after == before
}

/// Notes a sale of several shards that sold out with no grab left to find it (the
/// live sampler asks when its buckets read empty and no sell-out is kept yet): every
/// process is told, and the moment is kept for the report.
pub async fn if_sold_out(backend: &Backend, voucher_id: i64, shards: u32) -> Result<(), BackendError> {
    let before = ledger::changes_mark(&backend.db, voucher_id).await?;
    let Some(left) = units_left(backend, voucher_id, shards).await? else { return Ok(()) };
    let after = ledger::changes_mark(&backend.db, voucher_id).await?;
    if left.iter().all(|&n| n <= 0) && none_moving(before, after) {
        sold_out(backend, voucher_id, shards).await;
    }
    Ok(())
}

/// Units left in each bucket of the sale, read at once; `None` when Redis lacks one.
pub async fn units_left(backend: &Backend, voucher_id: i64, shards: u32) -> Result<Option<Vec<i64>>, BackendError> {
    let gets =
        (0..shards).map(|bucket| redis::Cmd::get(&backend.bucket_keys(Bucket { voucher_id, shards, bucket }).left));
    let counts = backend.redis.query_each::<Option<i64>>(gets).await;
    let counts = counts.into_iter().collect::<Result<Vec<Option<i64>>, _>>()?;
    Ok(counts.into_iter().collect())
}

/// The sale sold out: every process is told (their flags refuse at once), and the
/// first sell-out is kept for the report, by the gate's clock. A unit given back
/// while that was said (a cancel's give-back publishes `restock` before this
/// `sold_out` may arrive) is said again after it, so no flag outlives it.
async fn sold_out(backend: &Backend, voucher_id: i64, shards: u32) {
    bus::publish(backend, &SaleEvent::SoldOut { voucher_id }).await;
    if let Ok(Some(left)) = units_left(backend, voucher_id, shards).await {
        if left.iter().sum::<i64>() > 0 {
            bus::publish(backend, &SaleEvent::Restocked { voucher_id }).await;
            return;
        }
    }
    let kept = async {
        let at = super::gate::clock(backend, Some(voucher_id)).await?;
        vouchers::record_sold_out(&backend.db, voucher_id, at).await?;
        Ok::<_, BackendError>(())
    };
    if let Err(e) = kept.await {
        tracing::warn!(voucher_id, "keeping the sell-out's time: {e}");
    }
}

/// Gathers up to `units` of the sale's units in bucket 0, moved from the others (an
/// operator's withdrawal from a sale of several shards takes them there in one step,
/// all or nothing). Returns the units bucket 0 holds after.
pub async fn gather(backend: &Backend, voucher_id: i64, shards: u32, units: i64) -> Result<i64, BackendError> {
    let left = match units_left(backend, voucher_id, shards).await? {
        Some(left) => left,
        // A bucket Redis lost: rebuilt from the database, as a refill does, and read
        // again (a review, 2026-12-02: the withdrawal was refused `not_enough_stock`
        // while the sale held the units).
        None => {
            rebuild(backend, voucher_id).await?;
            let Some(left) = units_left(backend, voucher_id, shards).await? else { return Ok(0) };
            left
        }
    };
    if left.iter().sum::<i64>() < units {
        // Not enough unsold: the withdrawal is refused, and the buckets stay as they are.
        return Ok(left[0]);
    }
    let mut held = left[0];
    for (from, &n) in left.iter().enumerate().skip(1) {
        if held >= units {
            break;
        }
        let want = n.min(units - held);
        if want > 0 {
            let change = ledger::owe_move(&backend.db, voucher_id, (from as u32, 0), want).await?;
            held += stock::finish(backend, &change).await?.recorded.abs();
        }
    }
    Ok(held)
}
