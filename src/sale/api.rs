//! Sale endpoints: `/api/grab`, `/api/grab_result`.

use super::{GrabState, GrabTicket};
use crate::error::AppResult;
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    super::{
        gate,
        gate::Verdict,
        results::{FailReason, StoredResult},
        GrabStatus,
    },
    crate::{
        auth::session::require_user,
        error::{AppError, ErrorCode},
        orders::lifecycle,
        state::AppState,
    },
    redis::AsyncCommands,
    std::time::Duration,
};

/// Longest a grab waits on Redis before answering `unavailable`: a shopper must hear
/// back, and a Redis that has not answered by then is down or overloaded. (A grab the
/// gate decided just before the deadline still stands; asking again says so.)
#[cfg(feature = "ssr")]
const REDIS_DEADLINE: Duration = Duration::from_secs(2);

/// Tries to buy one unit. Answers at once with the order id (status queued); the
/// order is persisted in the background. Refusals: `not_signed_in`,
/// `unknown_voucher`, `not_started`, `ended`, `sold_out`, `already_bought`.
/// Once this process knows the voucher is sold out it answers `sold_out` without
/// asking Redis (to everyone, buyers included).
#[server(prefix = "/api", endpoint = "grab", input = Json)]
pub async fn grab(voucher_id: i64) -> AppResult<GrabTicket> {
    let state = expect_context::<AppState>();
    let user_id = require_user(&state.secrets)?;
    // A stopping process takes no new orders; the client retries on another.
    if state.shutdown.is_shutdown() {
        return Err(ErrorCode::Unavailable.into());
    }
    if state.sold_out.refuse(voucher_id) {
        metrics::counter!("seckill_grabs_total", "outcome" => "sold_out_locally").increment(1);
        return Err(ErrorCode::SoldOut.into());
    }
    let backend = &state.backend;
    let started = std::time::Instant::now();
    let decide = async {
        let order_id = state.ids.next(&backend.redis).await?;
        let verdict = gate::grab(backend, &backend.keys(voucher_id), voucher_id, user_id, order_id).await?;
        Ok::<_, redis::RedisError>((order_id, verdict))
    };
    let decided = tokio::time::timeout(REDIS_DEADLINE, decide).await;
    metrics::histogram!("seckill_gate_seconds").record(started.elapsed());
    let Ok(Ok((order_id, verdict))) = decided else {
        metrics::counter!("seckill_grabs_total", "outcome" => "unavailable").increment(1);
        match decided {
            Ok(Err(e)) => tracing::warn!(voucher_id, "grab: {e}"),
            _ => tracing::warn!(voucher_id, "grab: Redis did not answer within {REDIS_DEADLINE:?}"),
        }
        return Err(ErrorCode::Unavailable.into());
    };
    metrics::counter!("seckill_grabs_total", "outcome" => verdict.label()).increment(1);
    match verdict {
        Verdict::Granted => {
            backend.wakeups.wake(voucher_id);
            Ok(GrabTicket { order_id: order_id.to_string(), status: GrabStatus::Queued })
        }
        Verdict::Refused(code) => {
            if code == ErrorCode::SoldOut {
                state.sold_out.set(voucher_id);
            }
            Err(code.into())
        }
    }
}

/// Where the shopper's own grab stands: queued, success (with the order) or failed
/// (with the reason: `already_bought`, `sold_out`, `dead_letter`, or `lost` when Redis
/// lost the grab with its data before it was saved). Other shoppers' orders are
/// `unknown_order`.
#[server(prefix = "/api", endpoint = "grab_result", input = Json)]
pub async fn grab_result(voucher_id: i64, order_id: String) -> AppResult<GrabState> {
    let state = expect_context::<AppState>();
    let user_id = require_user(&state.secrets)?;
    let order_id: i64 = order_id.trim().parse().map_err(|_| AppError::invalid("order_id must be a decimal number."))?;
    let backend = &state.backend;
    let raw: Option<String> = backend.redis.clone().hget(&backend.keys(voucher_id).results, order_id).await?;
    let (status, reason) = match raw.as_deref().and_then(StoredResult::parse) {
        Some(r) if r.user_id == user_id => (r.status, r.reason),
        Some(_) => return Err(ErrorCode::UnknownOrder.into()),
        // Redis forgot the result (it was rebuilt): the database still knows.
        None => (GrabStatus::Success, None),
    };
    if status != GrabStatus::Success {
        return Ok(GrabState { status, reason, order: None });
    }
    let order = lifecycle::get_for_user(&backend.db, order_id, user_id).await?.filter(|o| o.voucher_id == voucher_id);
    match order {
        Some(order) => Ok(GrabState { status, reason: None, order: Some(order) }),
        None if raw.is_none() && lost_by_redis(backend, voucher_id, order_id, user_id).await? => {
            Ok(GrabState { status: GrabStatus::Failed, reason: Some(FailReason::Lost.as_str().into()), order: None })
        }
        None => Err(ErrorCode::UnknownOrder.into()),
    }
}

/// An order neither Redis nor the database knows, minted during the sale and not in
/// the future, asked about while Redis still keeps the sale, by a shopper Redis holds
/// no grant for: Redis lost it with its data (emptied and rebuilt from the database,
/// or a replica promoted before the grab reached it). The gate writes every grant's
/// result and buyer in the same step as the grant, and both stay until the sale's keys
/// expire, so a grant Redis still holds always has them. Ids carry their grab's
/// second; a second's slack covers the app's and Redis's clocks. The window comes from
/// the database, which Redis's losses do not touch.
#[cfg(feature = "ssr")]
async fn lost_by_redis(
    backend: &crate::backend::Backend,
    voucher_id: i64,
    order_id: i64,
    user_id: i64,
) -> AppResult<bool> {
    let Some(voucher) = crate::voucher::store::get(&backend.db, voucher_id).await? else { return Ok(false) };
    let now = chrono::Utc::now().timestamp_millis();
    let granted_at = crate::ids::decompose(order_id).0.timestamp_millis();
    let minted_in_sale = voucher.begins_at - 1_000 <= granted_at && granted_at <= voucher.ends_at.min(now) + 1_000;
    if !minted_in_sale || now > voucher.ends_at + crate::voucher::DRAIN_GRACE_MS {
        return Ok(false);
    }
    let holds_a_grant: bool = backend.redis.clone().sismember(&backend.keys(voucher_id).buyers, user_id).await?;
    Ok(!holds_a_grant)
}
