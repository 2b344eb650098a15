//! Giving a cancelled order's unit back in Redis (`lua/restock.lua`), once per order:
//! stock + 1, the buyer slot freed, and `restocked` published so every process clears
//! its sold-out flag. This module owns the script's interface, and the step that
//! follows a cancel: run the script, then strike the debt from the database.

use super::lifecycle::{self, Owed};
use crate::{
    backend::{Backend, BackendError},
    bus::SaleEvent,
};

/// Runs the give-back the database recorded as owed, then marks it settled. Safe to
/// run any number of times, from any process: the script acts once per order.
pub async fn restock(backend: &Backend, owed: &Owed) -> Result<bool, BackendError> {
    let keys = backend.keys(owed.voucher_id);
    let acted: i64 = backend
        .scripts
        .restock
        .key(&keys.stock)
        .key(&keys.buyers)
        .key(&keys.restocked)
        .key(&keys.window)
        .arg(owed.order_id)
        .arg(owed.user_id)
        .arg(&*backend.events_channel)
        .arg(SaleEvent::Restocked { voucher_id: owed.voucher_id }.encode())
        .invoke_async(&mut backend.redis.clone())
        .await?;
    lifecycle::settled(&backend.db, owed.order_id).await?;
    Ok(acted == 1)
}
