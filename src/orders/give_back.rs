//! Ending an order that will never be persisted (`lua/give_back.lua`): its result
//! becomes `failed`, what it held goes back, and its stream entry is acknowledged, in
//! one Redis step. This module owns the script's interface; each way an order can end
//! has a named constructor saying what goes back.

use super::store::OrderMsg;
use crate::{
    backend::{layout::GROUP, Backend, RedisConn},
    bus::SaleEvent,
    sale::results::{FailReason, StoredResult},
};
use redis::RedisResult;

/// One order to end, and how it ends.
#[derive(Clone, Copy, Debug)]
pub struct GiveBack<'a> {
    order: &'a OrderMsg,
    entry_id: &'a str,
    ending: Ending,
}

/// The ways an order ends without being persisted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    Duplicate,
    NoStock,
    DeadLetter,
}

impl Ending {
    fn reason(self) -> FailReason {
        match self {
            Self::Duplicate => FailReason::AlreadyBought,
            Self::NoStock => FailReason::SoldOut,
            Self::DeadLetter => FailReason::DeadLetter,
        }
    }

    /// The unit it took goes back on sale.
    fn restocks(self) -> bool {
        self != Self::NoStock
    }

    /// The shopper may grab this voucher again.
    fn frees_slot(self) -> bool {
        self != Self::Duplicate
    }
}

impl<'a> GiveBack<'a> {
    /// The shopper already holds another order: the unit goes back, the buyer slot
    /// stays (it belongs to the other order).
    pub fn duplicate(order: &'a OrderMsg, entry_id: &'a str) -> Self {
        Self { order, entry_id, ending: Ending::Duplicate }
    }

    /// The database had no unit for it (Redis was rebuilt with too much): the buyer
    /// slot goes back; the unit never existed.
    pub fn no_stock(order: &'a OrderMsg, entry_id: &'a str) -> Self {
        Self { order, entry_id, ending: Ending::NoStock }
    }

    /// The database keeps refusing it: unit and slot go back, and a copy goes to the
    /// dead-letter stream for the operator.
    pub fn dead_letter(order: &'a OrderMsg, entry_id: &'a str) -> Self {
        Self { order, entry_id, ending: Ending::DeadLetter }
    }

    /// Runs the step; false when the entry was already acknowledged (another worker
    /// ended it first), so nothing is ever given back twice.
    pub async fn run(&self, backend: &Backend, redis: &mut RedisConn) -> RedisResult<bool> {
        let m = self.order;
        let keys = backend.keys(m.voucher_id);
        let (ending, flag) = (self.ending, |on: bool| if on { "1" } else { "0" });
        let acted: i64 = backend
            .scripts
            .give_back
            .key(&keys.stock)
            .key(&keys.buyers)
            .key(&keys.results)
            .key(&keys.orders)
            .key(&keys.dlq)
            .key(&keys.window)
            .arg(m.order_id)
            .arg(m.user_id)
            .arg(self.entry_id)
            .arg(GROUP)
            .arg(StoredResult::failed(m.user_id, ending.reason()).encode())
            .arg(flag(ending.restocks()))
            .arg(flag(ending.frees_slot()))
            .arg(if ending == Ending::DeadLetter { ending.reason().as_str() } else { "" })
            .arg(&*backend.events_channel)
            .arg(SaleEvent::Restocked { voucher_id: m.voucher_id }.encode())
            .arg(SaleEvent::DeadLettered { voucher_id: m.voucher_id, order_id: m.order_id }.encode())
            .invoke_async(redis)
            .await?;
        if acted == 1 && ending == Ending::DeadLetter {
            metrics::counter!("seckill_dead_letters_total").increment(1);
        }
        Ok(acted == 1)
    }
}
