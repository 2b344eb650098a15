//! Sale endpoints: `/api/grab`, `/api/grab_result` (over HTTP answered by plain axum
//! handlers, `hot_path.rs`, with the same contract; the bodies below run only when
//! called in-process; both run `grab.rs`), `/api/grab_token` (a fair start's
//! token) and `/api/server_time` (the gate's clock, which the page counts down by).

use super::{GateTime, GrabState, GrabTicket, IssuedToken};
use crate::error::AppResult;
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {super::context::Context, crate::auth::caller::user};

/// Tries to buy one unit. Answers at once with the order id (status queued); the
/// order is persisted in the background. A sale with a fair start needs the
/// shopper's `token` (`grab_token`). Refusals: `not_signed_in`, `unknown_voucher`,
/// `not_started`, `ended`, `sale_paused`, `invalid_token`, `sold_out`, `already_bought`.
/// Once this process knows the voucher is sold out it answers `sold_out` without
/// asking Redis (to everyone, buyers included), unless `again` is true: a grab sent
/// again because the first one's answer was lost or shed is asked of the gate, so a
/// buyer hears `already_bought` with their order and its receipt. So is a grab sent
/// with an `Idempotency-Key` (a retry whose first answer was never kept, its process
/// gone, is served afresh).
#[server(prefix = "/api", endpoint = "grab", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn grab(voucher_id: i64, token: Option<String>, again: Option<bool>) -> AppResult<GrabTicket> {
    let state = Context::get();
    let user_id = user::<Grab>().await?;
    super::grab::grab(&state, user_id, voucher_id, (token.as_deref(), again.unwrap_or(false))).await
}
crate::error::refuses!(Grab: UnknownVoucher, NotStarted, Ended, SoldOut, AlreadyBought, SalePaused, InvalidToken);

/// The caller's grab token for a sale with a fair start, issued from its start
/// instant (by the gate's clock) and not before (`not_started`): it derives from a
/// secret the server keeps, so it cannot be made ahead of time, and it is the
/// caller's own (another shopper's token is `invalid_token`).
#[server(prefix = "/api", endpoint = "grab_token", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn grab_token(voucher_id: i64) -> AppResult<IssuedToken> {
    let state = Context::get();
    let user_id = user::<GrabToken>().await?;
    super::grab::grab_token(&state, user_id, voucher_id).await
}
crate::error::refuses!(GrabToken: UnknownVoucher, NotStarted, Ended);

/// Where the shopper's own grab stands: queued, success (with the order) or failed
/// (with the reason: `already_bought`, `sold_out`, `dead_letter`, or `lost` when Redis
/// lost the grab with its data before it was saved). Other shoppers' orders are
/// `unknown_order`. `receipt` is the one `grab` answered with: a grant Redis lost is
/// declared `lost` only to the shopper who presents it (without it such a grant reads
/// `unknown_order`, and nothing changes).
#[server(prefix = "/api", endpoint = "grab_result", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn grab_result(voucher_id: i64, order_id: String, receipt: Option<String>) -> AppResult<GrabState> {
    let state = Context::get();
    let user_id = user::<GrabResult>().await?;
    super::grab::grab_result(&state, user_id, voucher_id, &order_id, receipt.as_deref()).await
}
crate::error::refuses!(GrabResult: UnknownOrder);

/// The gate's clock (Redis TIME), in Unix ms: the page measures its own clock's offset
/// from it, so its countdown and its Grab button follow the instant the gate opens,
/// whatever the device's clock says. With `voucher_id`, the clock of the node that
/// holds that sale (on a Redis Cluster, nodes' clocks may differ a little).
#[server(prefix = "/api", endpoint = "server_time", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn server_time(voucher_id: Option<i64>) -> AppResult<GateTime> {
    let state = Context::get();
    Ok(GateTime { now_ms: super::gate::clock(&state.backend, voucher_id).await? })
}
crate::error::refuses!(ServerTime:);
