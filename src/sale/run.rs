//! Running a live sale (operators): `/api/update_voucher`, `/api/add_stock`,
//! `/api/withdraw_stock`, `/api/pause_sale`, `/api/resume_sale`, `/api/end_sale`, and
//! `/api/list_audit`, the operator's log of them.
//!
//! Each change is made (`change`) in the database first (the row's `version` bumped), then in
//! Redis before the call answers: the window (times, pause, price) with its version
//! (`warm::warm`: an older push never overwrites a newer one), or the stock
//! (`sale::stock`). So the gate follows the moment the call returns, on every process
//! at once (they share it). Then every process is told ([`super::launch::changed`]),
//! and each one's own caches (sold-out flags, shop page) follow within a second, or
//! when it next reads the sale-change count if it missed the message. Every change is in
//! the operator's log with the voucher before and after.

use super::StockChanged;
use crate::{audit::AuditEntry, error::AppResult, listing::Page, voucher::Voucher};
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    super::{change, context::Context},
    crate::{
        audit::store as audit,
        auth::caller::{operator, ForOperators},
        listing::Paging,
        voucher::store::Edit,
    },
};

/// Changes a voucher's title, price, face value, start or end (operators; fields left
/// out stay). Before the start every field may change; after it, all but the start,
/// and the end not before now. A window sent keeps `create_voucher`'s bounds (a month
/// long at most, its start a year away at most). A new price applies to grabs from now on: orders keep
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
    let request = change::EditRequest { title, price, face_value, begins_at, ends_at };
    change::edit::<UpdateVoucher>("update_voucher", voucher_id, |row, now| request.check(row, now)).await
}
crate::error::refuses!(UpdateVoucher: UnknownVoucher, Ended, InvalidPrice, FaceValueBelowPrice, InvalidTime, SaleStarted, SavedNotApplied);

/// Pauses a sale: from when this returns, every grab is refused `sale_paused` (a
/// shopper who holds an order hears `already_bought`, with it).
#[server(prefix = "/api", endpoint = "pause_sale", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn pause_sale(voucher_id: i64) -> AppResult<Voucher> {
    set_paused::<PauseSale>("pause_sale", voucher_id, true).await
}
crate::error::refuses!(PauseSale: UnknownVoucher, Ended, SavedNotApplied);

/// Resumes a paused sale.
#[server(prefix = "/api", endpoint = "resume_sale", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn resume_sale(voucher_id: i64) -> AppResult<Voucher> {
    set_paused::<ResumeSale>("resume_sale", voucher_id, false).await
}
crate::error::refuses!(ResumeSale: UnknownVoucher, Ended, SavedNotApplied);

#[cfg(feature = "ssr")]
async fn set_paused<F: ForOperators>(action: &'static str, voucher_id: i64, paused: bool) -> AppResult<Voucher> {
    change::edit::<F>(action, voucher_id, |row, now| {
        change::not_ended(row, now)?;
        Ok(Edit { paused: Some(paused), ..Edit::default() })
    })
    .await
}

/// Ends a sale now (by the gate's clock): from when this returns, every grab is
/// refused `ended` (a shopper who holds an order hears `already_bought`, with it).
/// Orders already granted keep their deadlines to pay. The end answered is when the
/// gate stopped granting: later than asked if the call was held up on its way.
#[server(prefix = "/api", endpoint = "end_sale", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn end_sale(voucher_id: i64) -> AppResult<Voucher> {
    change::edit::<EndSale>("end_sale", voucher_id, |row, now| {
        change::not_ended(row, now)?;
        // A sale ended before its start keeps a window of 1 ms, in the past.
        let begins_at = (row.begins_at >= now).then_some(now - 1);
        Ok(Edit { ends_at: Some(now), begins_at, ..Edit::default() })
    })
    .await
}
crate::error::refuses!(EndSale: UnknownVoucher, Ended, SavedNotApplied);

/// Adds units to a sale, at any time before its end; a sold-out sale reopens.
#[server(prefix = "/api", endpoint = "add_stock", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn add_stock(voucher_id: i64, units: i64) -> AppResult<StockChanged> {
    change::change_stock::<AddStock>("add_stock", voucher_id, change::checked_units(units)?).await
}
crate::error::refuses!(AddStock: UnknownVoucher, Ended, StockChangeLimit, SavedNotApplied);

/// Withdraws units nobody was granted: all asked for, or none (`not_enough_stock`).
/// From a sale of several shards they are gathered in one bucket first, and tried
/// again (three tries) when grabs took some meanwhile: `unavailable` if they did each
/// time.
#[server(prefix = "/api", endpoint = "withdraw_stock", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn withdraw_stock(voucher_id: i64, units: i64) -> AppResult<StockChanged> {
    change::change_stock::<WithdrawStock>("withdraw_stock", voucher_id, -change::checked_units(units)?).await
}
crate::error::refuses!(WithdrawStock: UnknownVoucher, Ended, NotEnoughStock, StockChangeLimit, SavedNotApplied);

/// Entries a page of `list_audit` holds unless asked, and at most.
#[cfg(feature = "ssr")]
pub const AUDIT_PAGE: crate::listing::PageSize = crate::listing::PageSize { default: 200, most: 1_000 };

/// The operator's log, of one voucher or of all, newest first, a page at a time
/// (operators): `limit` 1–1000 (200 when absent), `after` the `next` of the page before.
#[server(prefix = "/api", endpoint = "list_audit", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn list_audit(
    voucher_id: Option<i64>,
    limit: Option<i64>,
    after: Option<String>,
) -> AppResult<Page<AuditEntry>> {
    let state = Context::get();
    operator::<ListAudit>()?;
    let paging = Paging::asked(limit, after.as_deref(), AUDIT_PAGE)?;
    let rows = audit::list(&state.backend.db, voucher_id, paging.before, paging.rows()).await?;
    Ok(paging.page(rows, |entry| entry.id))
}
crate::error::refuses!(ListAudit:);
