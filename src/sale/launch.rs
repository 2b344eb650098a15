//! Putting a voucher on sale (operators): `/api/create_voucher` makes one and warms
//! it into Redis, `/api/warm_up` warms it again. Running the sale from then on (edit,
//! pause, stock, end) is `run.rs`; both tell every process of the change here
//! ([`changed`]).

// `create_voucher`'s arguments are its request's JSON fields (the API's contract), one
// each; the server macro writes the browser's and the server's functions from them.
#![allow(clippy::too_many_arguments)]

use crate::{error::AppResult, voucher::Voucher};
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    super::{context::Context, warm},
    crate::{
        audit::store::{self as audit, Record},
        auth::caller::operator,
        bus::{self, SaleEvent},
        error::ErrorCode,
        voucher::{left::units_left, store, NewVoucher},
    },
};

/// Longest `create_voucher` waits for its warm-up once the voucher is saved (a warm-up
/// takes milliseconds while Redis answers).
#[cfg(feature = "ssr")]
const WARM_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Creates a voucher and warms it into Redis (operators; made while Redis does not
/// answer, the sale is warmed once it does). Times are RFC 3339; a sale
/// lasts at most 31 days and begins at most 366 days from now (`invalid_time`); `price`
/// (what a shopper pays) and `face_value` (what it is worth) are minor units of the
/// currency, 0 and the price when left out; `fair_start` (off when left out) makes
/// every grab need a grab token, issued from the start instant; `shards` (1 to 64, 1
/// when left out) splits the units over that many buckets in Redis, each in its own
/// hash slot, so a Redis Cluster serves one sale from several masters.
#[server(prefix = "/api", endpoint = "create_voucher", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn create_voucher(
    title: String,
    stock: i64,
    begins_at: String,
    ends_at: String,
    price: Option<i64>,
    face_value: Option<i64>,
    fair_start: Option<bool>,
    shards: Option<i64>,
) -> AppResult<Voucher> {
    let state = Context::get();
    let actor = operator::<CreateVoucher>()?;
    let (price, now) = (price.unwrap_or(0), chrono::Utc::now());
    let mut new = NewVoucher::parse(&title, stock, (&begins_at, &ends_at), (price, face_value.unwrap_or(price)), now)?;
    new.fair_start = fair_start.unwrap_or(false);
    new.shards = crate::voucher::rules::shards(shards)?;
    let row = store::insert(&state.backend.db, &new).await?;
    // Saved: the call answers the voucher from here on, so that a retry with its
    // Idempotency-Key is answered it again and makes no second one (`unavailable` is
    // not kept). A Redis that does not answer now (a node of a cluster down) gets the
    // sale from the worker, whose reader warms it once Redis answers. The warm-up and
    // its news run on a task of their own, waited for [`WARM_WAIT`] at most: a node
    // that does not answer holds each call to its timeout, a bucket at a time, and the
    // front door answers `unavailable` past its own limit whatever was made.
    let (warming, saved) = (state.clone(), row.clone());
    let warm_up = tokio::spawn(async move {
        if let Err(e) = warm::warm(&warming.backend, &saved).await {
            tracing::warn!(voucher = saved.id, "voucher created, warmed once Redis answers: {e}");
        }
        changed(&warming, saved.id).await;
    });
    if tokio::time::timeout(WARM_WAIT, warm_up).await.is_err() {
        tracing::warn!(voucher = row.id, "voucher created; its warm-up goes on after the answer");
    }
    tracing::info!(voucher = row.id, stock = row.stock, %actor, "voucher created");
    let voucher = row.to_voucher(row.stock_left);
    let after = Some(serde_json::to_value(&voucher).unwrap_or_default());
    let record =
        Record { actor: actor.name(), action: "create_voucher", voucher_id: Some(row.id), before: None, after };
    audit::record(&state.backend.db, record).await;
    Ok(voucher)
}
crate::error::refuses!(CreateVoucher: InvalidPrice, FaceValueBelowPrice, InvalidTime);

/// Loads a voucher into Redis (operators). Idempotent: stock Redis already holds is never
/// reset; when Redis lost it, stock and buyers are rebuilt from the database.
#[server(prefix = "/api", endpoint = "warm_up", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn warm_up(voucher_id: i64) -> AppResult<Voucher> {
    let state = Context::get();
    let actor = operator::<WarmUp>()?;
    let row = store::get(&state.backend.db, voucher_id).await?.ok_or(ErrorCode::UnknownVoucher)?;
    let rebuilt = warm::warm(&state.backend, &row).await?;
    changed(&state, row.id).await;
    let remaining = units_left(&state.backend, std::slice::from_ref(&row)).await?;
    let after = Some(serde_json::json!({ "remaining": remaining[0], "rebuilt": rebuilt }));
    let record = Record { actor: actor.name(), action: "warm_up", voucher_id: Some(row.id), before: None, after };
    audit::record(&state.backend.db, record).await;
    Ok(row.to_voucher(remaining[0]))
}
crate::error::refuses!(WarmUp: UnknownVoucher);

/// Tells every process a sale changed: what follows sales here (the shared shop page)
/// hears it at once (the operator's next page shows the change), and every other
/// process when it hears the sale event, or else when it next reads the sale-change count
/// this bumps (`bus::follow`), within a second.
#[cfg(feature = "ssr")]
pub(super) async fn changed(state: &Context, voucher_id: i64) {
    let event = SaleEvent::VoucherChanged { voucher_id, origin: state.bus.origin() };
    state.bus.tell_here(&event);
    let key = crate::backend::layout::sale_changes(&state.backend.namespace);
    let bumped: redis::RedisResult<i64> = redis::AsyncCommands::incr(&mut state.backend.redis.clone(), key, 1).await;
    match bumped {
        Ok(value) => state.bus.bumped(value),
        Err(e) => tracing::warn!(voucher_id, "bumping the sale-change count: {e}"),
    }
    bus::publish(&state.backend, &event).await;
}
