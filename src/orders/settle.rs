//! Settling persisted orders in Redis (`lua/settle.lua`): their results become
//! `success`, their entries are acknowledged, and a voucher Redis rebuilt before they
//! were committed gives up the units they hold, in one Redis step per batch. This
//! module owns the script's interface.

use super::entry::OrderMsg;
use crate::{
    backend::{
        layout::{SaleKeys, GROUP},
        Backend, RedisConn, ScriptCall,
    },
    orders::results::StoredResult,
};
use redis::RedisResult;

/// Settles orders of one voucher the database has committed, given with the ids of
/// the stream entries that carried them. `expires_at` (Unix ms) is when the sale's
/// keys go, unless the sale's window (which follows an operator's changes) says. Returns how many found Redis had already sold their unit again (a
/// rebuild's race, logged; the database refuses the later grant).
pub async fn settle(
    backend: &Backend,
    redis: &mut RedisConn,
    (voucher_id, keys): (i64, &SaleKeys),
    expires_at: i64,
    orders: &[(&str, &OrderMsg)],
) -> RedisResult<i64> {
    if orders.is_empty() {
        return Ok(0);
    }
    let keys = [&*keys.left, &keys.buyers, &keys.results, &keys.orders, &keys.given_back, &keys.window];
    // An order's four arguments take about 80 bytes.
    let mut call = ScriptCall::new(&backend.scripts.settle, &keys, 2 + 4 * orders.len(), 32 + 80 * orders.len());
    call.arg(GROUP).arg(expires_at);
    for (entry_id, m) in orders {
        call.arg(entry_id).arg(m.order_id).arg(m.user_id).arg(StoredResult::Success { user_id: m.user_id }.encode());
    }
    let short: i64 = call.invoke(redis).await?;
    if short > 0 {
        tracing::warn!(voucher_id, short, "orders committed after a rebuild found their units sold again");
    }
    Ok(short)
}
