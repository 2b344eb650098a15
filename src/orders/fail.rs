//! Ending an order that will never be persisted (`lua/fail.lua`): its result
//! becomes `failed`, what it held goes back, and its stream entry is acknowledged, in
//! one Redis step. This module owns the script's interface and says, for each fate
//! a persisted message can meet, what goes back.

use super::{entry::OrderMsg, store::Fate};
use crate::{
    backend::{
        layout::{SaleKeys, GROUP},
        Backend, RedisConn,
    },
    bus::SaleEvent,
    orders::{results::StoredResult, FailReason},
};
use redis::RedisResult;

/// One order to end, and the fate that ends it.
#[derive(Clone, Copy, Debug)]
pub struct Failure<'a> {
    order: &'a OrderMsg,
    entry_id: &'a str,
    terms: Terms,
}

/// What an ending gives back, and what it tells the shopper.
#[derive(Clone, Copy, Debug)]
struct Terms {
    reason: FailReason,
    /// The unit it took goes back on sale.
    gives_back: bool,
    /// The shopper may grab this voucher again.
    frees_slot: bool,
    /// A copy goes to the dead-letter stream for the operator.
    dead_letter: bool,
}

impl Terms {
    /// How an order that persisting did not store ends; `None` for a persisted one
    /// (it keeps its unit and slot, and `settle` marks it a success). The one place
    /// a fate becomes a give-back; its shopper is told the fate's reason.
    fn of(fate: Fate) -> Option<Self> {
        let reason = fate.reason()?;
        let (gives_back, frees_slot, dead_letter) = match fate {
            Fate::Persisted => return None,
            // The unit goes back; the slot belongs to the shopper's other order.
            Fate::Duplicate => (true, false, false),
            // Redis was rebuilt with too much: the unit never existed.
            Fate::NoStock => (false, true, false),
            // Buried in the database now or by an earlier try (whose give-back a crash
            // may have left undone): unit and slot go back, a copy to the operator.
            Fate::Buried => (true, true, true),
        };
        Some(Terms { reason, gives_back, frees_slot, dead_letter })
    }
}

impl<'a> Failure<'a> {
    /// How an order that persisting did not store ends ([`Terms::of`]); `None` for a
    /// persisted one.
    pub fn of(order: &'a OrderMsg, entry_id: &'a str, fate: Fate) -> Option<Self> {
        Some(Self { order, entry_id, terms: Terms::of(fate)? })
    }

    /// Runs the step; false when the entry was already acknowledged (another worker
    /// ended it first), so nothing is ever given back twice.
    /// `keys`: the bucket's whose stream held the entry (its shopper's bucket).
    pub async fn run(&self, backend: &Backend, redis: &mut RedisConn, keys: &SaleKeys) -> RedisResult<bool> {
        let m = self.order;
        let (terms, flag) = (self.terms, |on: bool| if on { "1" } else { "0" });
        let acted: i64 = backend
            .scripts
            .fail
            .key(&keys.left)
            .key(&keys.buyers)
            .key(&keys.results)
            .key(&keys.orders)
            .key(&keys.dlq)
            .key(&keys.window)
            .arg(m.order_id)
            .arg(m.user_id)
            .arg(self.entry_id)
            .arg(GROUP)
            .arg(StoredResult::Failed { user_id: m.user_id, reason: terms.reason }.encode())
            .arg(flag(terms.gives_back))
            .arg(flag(terms.frees_slot))
            .arg(if terms.dead_letter { terms.reason.as_str() } else { "" })
            .arg(&*backend.events_channel)
            .arg(SaleEvent::Restocked { voucher_id: m.voucher_id }.encode())
            .arg(SaleEvent::DeadLettered { voucher_id: m.voucher_id, order_id: m.order_id }.encode())
            .invoke_async(redis)
            .await?;
        if acted == 1 && terms.dead_letter {
            metrics::counter!("seckill_dead_letters_total").increment(1);
        }
        Ok(acted == 1)
    }
}
