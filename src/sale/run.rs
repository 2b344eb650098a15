//! Running a live sale (operators): `/api/update_voucher`, `/api/add_stock`,
//! `/api/withdraw_stock`, `/api/pause_sale`, `/api/resume_sale`, `/api/end_sale`, and
//! `/api/list_audit`, the operator's log of them.
//!
//! Each change is made in the database first (the row's `version` bumped), then in
//! Redis before the call answers: the window (times, pause, price) with its version
//! (`warm::warm`: an older push never overwrites a newer one), or the stock
//! (`sale::stock`). So the gate follows the moment the call returns, on every process
//! at once (they share it). Then every process is told ([`super::launch::changed`]),
//! and each one's own caches (sold-out flags, shop page) follow within a second, or
//! when it next reads the sale-change count if it missed the message. Every change is in
//! the operator's log with the voucher before and after.

use super::StockChanged;
use crate::{audit::AuditEntry, error::AppResult, voucher::Voucher};
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    super::{context::Context, launch::changed, shards, stock, warm},
    crate::{
        audit::store::{self as audit, Record},
        auth::{caller::require_operator, session::Actor},
        error::{AppError, ErrorCode},
        voucher::{
            left::units_left,
            rules,
            store::{self, Edit, VoucherRow},
            MAX_STOCK,
        },
    },
};

/// Changes a voucher's title, price, face value, start or end (operators; fields left
/// out stay). Before the start every field may change; after it, all but the start,
/// and the end not before now. A new price applies to grabs from now on: orders keep
/// the price of their grab.
#[server(prefix = "/api", endpoint = "update_voucher", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn update_voucher(
    voucher_id: i64,
    title: Option<String>,
    price: Option<i64>,
    face_value: Option<i64>,
    begins_at: Option<String>,
    ends_at: Option<String>,
) -> AppResult<Voucher> {
    let request = EditRequest { title, price, face_value, begins_at, ends_at };
    run("update_voucher", voucher_id, |row, now| request.check(row, now)).await
}

/// Pauses a sale: from when this returns, every grab is refused `sale_paused`.
#[server(prefix = "/api", endpoint = "pause_sale", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn pause_sale(voucher_id: i64) -> AppResult<Voucher> {
    set_paused("pause_sale", voucher_id, true).await
}

/// Resumes a paused sale.
#[server(prefix = "/api", endpoint = "resume_sale", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn resume_sale(voucher_id: i64) -> AppResult<Voucher> {
    set_paused("resume_sale", voucher_id, false).await
}

#[cfg(feature = "ssr")]
async fn set_paused(action: &'static str, voucher_id: i64, paused: bool) -> AppResult<Voucher> {
    run(action, voucher_id, |row, now| {
        not_ended(row, now)?;
        Ok(Edit { paused: Some(paused), ..Edit::default() })
    })
    .await
}

/// Ends a sale now (by the gate's clock): from when this returns, every grab is
/// refused `ended`. Orders already granted keep their deadlines to pay.
#[server(prefix = "/api", endpoint = "end_sale", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn end_sale(voucher_id: i64) -> AppResult<Voucher> {
    run("end_sale", voucher_id, |row, now| {
        not_ended(row, now)?;
        // A sale ended before its start keeps a window of 1 ms, in the past.
        let begins_at = (row.begins_at >= now).then_some(now - 1);
        Ok(Edit { ends_at: Some(now), begins_at, ..Edit::default() })
    })
    .await
}

/// Adds units to a sale, at any time before its end; a sold-out sale reopens.
#[server(prefix = "/api", endpoint = "add_stock", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn add_stock(voucher_id: i64, units: i64) -> AppResult<StockChanged> {
    change_stock("add_stock", voucher_id, checked_units(units)?).await
}

/// Withdraws units nobody was granted: all asked for, or none (`not_enough_stock`).
#[server(prefix = "/api", endpoint = "withdraw_stock", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn withdraw_stock(voucher_id: i64, units: i64) -> AppResult<StockChanged> {
    change_stock("withdraw_stock", voucher_id, -checked_units(units)?).await
}

/// An `update_voucher` request, as sent.
#[cfg(feature = "ssr")]
struct EditRequest {
    title: Option<String>,
    price: Option<i64>,
    face_value: Option<i64>,
    begins_at: Option<String>,
    ends_at: Option<String>,
}

#[cfg(feature = "ssr")]
impl EditRequest {
    /// The change this request makes to `row`, at `now` (the gate's clock, Unix ms).
    fn check(&self, row: &VoucherRow, now: i64) -> AppResult<Edit> {
        not_ended(row, now)?;
        let title = self.title.as_deref().map(rules::title).transpose()?;
        let (price, face_value) = (self.price.unwrap_or(row.price), self.face_value.unwrap_or(row.face_value));
        rules::amounts(price, face_value)?;
        let ms = |field, value: &Option<String>| {
            value.as_deref().map(|v| rules::time(field, v).map(|t| t.timestamp_millis())).transpose()
        };
        let (begins_at, ends_at) = (ms("begins_at", &self.begins_at)?, ms("ends_at", &self.ends_at)?);
        if begins_at.is_some_and(|b| b != row.begins_at) && now >= row.begins_at {
            return Err(ErrorCode::SaleStarted.into());
        }
        let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
        let window = (begins_at.unwrap_or(row.begins_at), ends_at.unwrap_or(row.ends_at));
        rules::window(at(window.0), at(window.1), at(now))?;
        Ok(Edit { title, price: self.price, face_value: self.face_value, begins_at, ends_at, paused: None })
    }
}

/// Refuses changes to a sale that is over.
#[cfg(feature = "ssr")]
fn not_ended(row: &VoucherRow, now: i64) -> AppResult<()> {
    if now >= row.ends_at {
        return Err(ErrorCode::Ended.into());
    }
    Ok(())
}

/// Attempts at a change while other changes of the same voucher keep coming first.
#[cfg(feature = "ssr")]
const ATTEMPTS: usize = 5;

/// Makes the change `decide` works out from the voucher's row and the gate's clock:
/// in the database (if the row is still what it was decided on; else decided again),
/// then in Redis, then announced and logged.
#[cfg(feature = "ssr")]
async fn run(
    action: &'static str,
    voucher_id: i64,
    decide: impl Fn(&VoucherRow, i64) -> AppResult<Edit>,
) -> AppResult<Voucher> {
    let state = Context::get();
    let actor = require_operator()?;
    let backend = &state.backend;
    for _ in 0..ATTEMPTS {
        let before = store::get(&backend.db, voucher_id).await?.ok_or(ErrorCode::UnknownVoucher)?;
        let edit = decide(&before, super::gate::clock(backend, Some(voucher_id)).await?)?;
        let Some(after) = store::edit(&backend.db, voucher_id, before.version, &edit).await? else { continue };
        if let Err(e) = warm::warm(backend, &after).await {
            return Err(saved_not_applied(&state, &actor, action, &before, e.into()).await);
        }
        return done(&state, &actor, action, &before, &after).await;
    }
    Err(AppError { code: ErrorCode::Unavailable, message: "Other changes of this sale keep coming; try again.".into() })
}

/// The units of a stock change as asked: 1 to [`MAX_STOCK`].
#[cfg(feature = "ssr")]
fn checked_units(units: i64) -> AppResult<i64> {
    if !(1..=MAX_STOCK).contains(&units) {
        return Err(AppError::invalid(format!("Units must be between 1 and {MAX_STOCK}.")));
    }
    Ok(units)
}

/// Adds (`units` > 0) or withdraws (< 0) stock.
#[cfg(feature = "ssr")]
async fn change_stock(action: &'static str, voucher_id: i64, units: i64) -> AppResult<StockChanged> {
    let state = Context::get();
    let actor = require_operator()?;
    let backend = &state.backend;
    let before = store::get(&backend.db, voucher_id).await?.ok_or(ErrorCode::UnknownVoucher)?;
    not_ended(&before, super::gate::clock(backend, Some(voucher_id)).await?)?;
    let over_the_cap = || AppError::invalid(format!("A sale has at most {MAX_STOCK} units."));
    if before.stock + units > MAX_STOCK {
        return Err(over_the_cap());
    }
    let changes = if units > 0 {
        // No row: another addition took the sale past the cap meanwhile.
        store::add_stock(&backend.db, voucher_id, units, MAX_STOCK).await?.ok_or_else(over_the_cap)?.0
    } else {
        if before.shards() > 1 {
            // All or nothing over the buckets: the units are gathered in bucket 0
            // (moves, which sell nothing), then withdrawn there in one step.
            shards::gather(backend, voucher_id, before.shards(), -units).await?;
        }
        vec![store::owe_withdrawal(&backend.db, voucher_id, -units).await?]
    };
    let mut made = stock::Made { recorded: 0, redis: 0 };
    for change in &changes {
        match stock::finish(backend, change).await {
            Ok(one) => (made.recorded, made.redis) = (made.recorded + one.recorded, made.redis + one.redis),
            Err(e) => return Err(saved_not_applied(&state, &actor, action, &before, e.into()).await),
        }
    }
    if made.recorded == 0 {
        if made.redis != 0 {
            let message = "The sale was rebuilt meanwhile and nothing was withdrawn; try again.";
            return Err(AppError { code: ErrorCode::Unavailable, message: message.into() });
        }
        return Err(ErrorCode::NotEnoughStock.into());
    }
    if units > 0 {
        // Here at once; every other process when it hears the restock, or else when it
        // next reads the sale-change count `done` bumps.
        state.sold_out.clear(voucher_id);
    }
    let after = store::get(&backend.db, voucher_id).await?.ok_or(ErrorCode::UnknownVoucher)?;
    let voucher = done(&state, &actor, action, &before, &after).await?;
    Ok(StockChanged { units: made.recorded.abs(), voucher })
}

/// A change the database holds but Redis could not be given now: the upkeep of every
/// process gives it within seconds (a window by its version, a stock change because it
/// is owed). It is announced and logged like any other; the operator is told it is
/// saved, so as not to send it again.
#[cfg(feature = "ssr")]
async fn saved_not_applied(
    state: &Context,
    actor: &Actor,
    action: &'static str,
    before: &VoucherRow,
    error: AppError,
) -> AppError {
    tracing::warn!(voucher = before.id, action, "sale change saved, not yet in Redis: {}", error.message);
    if let Ok(Some(after)) = store::get(&state.backend.db, before.id).await {
        let _ = done(state, actor, action, before, &after).await;
    }
    let message = "Saved; the sale follows within seconds. Do not send it again.";
    AppError { code: ErrorCode::Unavailable, message: message.into() }
}

/// Tells every process, logs the change, and answers the voucher as it is now.
#[cfg(feature = "ssr")]
async fn done(
    state: &Context,
    actor: &Actor,
    action: &'static str,
    before: &VoucherRow,
    after: &VoucherRow,
) -> AppResult<Voucher> {
    changed(state, after.id).await;
    let left = units_left(&state.backend, std::slice::from_ref(after)).await?;
    // Before: units left as the database counted them (Redis has moved on).
    let (old, new) = (before.to_voucher(before.stock_left), after.to_voucher(left[0]));
    tracing::info!(voucher = after.id, %actor, action, "sale changed");
    let json = |v: &Voucher| Some(serde_json::to_value(v).unwrap_or_default());
    let record =
        Record { actor: actor.name(), action, voucher_id: Some(after.id), before: json(&old), after: json(&new) };
    audit::record(&state.backend.db, record).await;
    Ok(new)
}

/// Entries `list_audit` answers at most.
#[cfg(feature = "ssr")]
const AUDIT_LIMIT: i64 = 200;

/// The newest 200 entries of the operator's log, of one voucher or of all (operators).
#[server(prefix = "/api", endpoint = "list_audit", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn list_audit(voucher_id: Option<i64>) -> AppResult<Vec<AuditEntry>> {
    let state = Context::get();
    require_operator()?;
    Ok(audit::list(&state.backend.db, voucher_id, AUDIT_LIMIT).await?)
}
