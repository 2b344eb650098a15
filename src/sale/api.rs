//! Sale endpoints: `/api/grab`, `/api/grab_result`, `/api/sale_stats`.

use super::{GrabState, GrabTicket, SaleFigures};
use crate::error::AppResult;
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    super::{gate::Verdict, keys::SaleKeys, parse_result, GrabStatus},
    crate::{
        auth::session::{require_admin, require_user},
        error::{AppError, ErrorCode},
        orders::store as orders,
        state::AppState,
        voucher::store as vouchers,
    },
    redis::AsyncCommands,
};

/// Tries to buy one unit. Answers at once with the order id (status queued); the
/// order is persisted in the background. Refusals: `not_signed_in`,
/// `unknown_voucher`, `not_started`, `ended`, `sold_out`, `already_bought`.
/// Once this process knows the voucher is sold out it answers `sold_out` without
/// asking Redis (to everyone, buyers included).
#[server(prefix = "/api", endpoint = "grab", input = Json)]
pub async fn grab(voucher_id: i64) -> AppResult<GrabTicket> {
    let state = expect_context::<AppState>();
    let user_id = require_user(&state.secrets)?;
    if state.sold_out.refuse(voucher_id) {
        return Err(ErrorCode::SoldOut.into());
    }
    let mut redis = state.redis.clone();
    let order_id = state.ids.next(&mut redis).await.map_err(|e| AppError::unavailable("order id", e))?;
    let keys = SaleKeys::new(&state.namespace, voucher_id);
    let verdict = state
        .scripts
        .grab(&mut redis, &keys, voucher_id, user_id, order_id)
        .await
        .map_err(|e| AppError::unavailable("gate", e))?;
    match verdict {
        Verdict::Granted => Ok(GrabTicket { order_id: order_id.to_string(), status: GrabStatus::Queued }),
        Verdict::Refused(code) => {
            if code == ErrorCode::SoldOut {
                state.sold_out.set(voucher_id);
            }
            Err(code.into())
        }
    }
}

/// Where the shopper's own grab stands: queued, success (with the order) or failed
/// (with the reason). Other shoppers' orders are `unknown_order`.
#[server(prefix = "/api", endpoint = "grab_result", input = Json)]
pub async fn grab_result(voucher_id: i64, order_id: String) -> AppResult<GrabState> {
    let state = expect_context::<AppState>();
    let user_id = require_user(&state.secrets)?;
    let order_id: i64 = order_id.trim().parse().map_err(|_| AppError::invalid("order_id must be a decimal number."))?;
    let keys = SaleKeys::new(&state.namespace, voucher_id);
    let mut redis = state.redis.clone();
    let raw: Option<String> =
        redis.hget(&keys.results, order_id).await.map_err(|e| AppError::unavailable("grab_result", e))?;
    let stored = raw.as_deref().and_then(parse_result);
    let (status, reason) = match stored {
        Some((status, owner, reason)) if owner == user_id => (status, reason),
        Some(_) => return Err(ErrorCode::UnknownOrder.into()),
        // Redis forgot the result (it was rebuilt): the database still knows.
        None => (GrabStatus::Success, None),
    };
    if status != GrabStatus::Success {
        return Ok(GrabState { status, reason, order: None });
    }
    let order = orders::get_for_user(&state.db, order_id, user_id)
        .await
        .map_err(|e| AppError::unavailable("grab_result order", e))?
        .filter(|o| o.voucher_id == voucher_id)
        .ok_or(ErrorCode::UnknownOrder)?;
    Ok(GrabState { status, reason: None, order: Some(order) })
}

/// The operator's numbers for one voucher (admin).
#[server(prefix = "/api", endpoint = "sale_stats", input = Json)]
pub async fn sale_stats(voucher_id: i64) -> AppResult<SaleFigures> {
    let state = expect_context::<AppState>();
    require_admin(&state.secrets)?;
    let voucher = vouchers::get(&state.db, voucher_id)
        .await
        .map_err(|e| AppError::unavailable("sale_stats voucher", e))?
        .ok_or(ErrorCode::UnknownVoucher)?;
    let persisted =
        vouchers::persisted(&state.db, voucher_id).await.map_err(|e| AppError::unavailable("sale_stats count", e))?;
    let keys = SaleKeys::new(&state.namespace, voucher_id);
    let mut redis = state.redis.clone();
    let (redis_stock, granted, stream_length, dead_letters): (Option<i64>, i64, i64, i64) = redis::pipe()
        .get(&keys.stock)
        .scard(&keys.buyers)
        .xlen(&keys.orders)
        .xlen(&keys.dlq)
        .query_async(&mut redis)
        .await
        .map_err(|e| AppError::unavailable("sale_stats redis", e))?;
    // NOGROUP (Redis lost the voucher) means nothing is pending; other errors are errors.
    let pending =
        match redis.xpending::<_, _, redis::streams::StreamPendingReply>(&keys.orders, super::keys::GROUP).await {
            Ok(p) => p.count() as i64,
            Err(e) if e.code() == Some("NOGROUP") => 0,
            Err(e) => return Err(AppError::unavailable("sale_stats pending", e)),
        };
    Ok(SaleFigures {
        voucher_id,
        total_stock: voucher.stock,
        redis_stock,
        granted,
        persisted,
        stream_length,
        pending,
        dead_letters,
        sold_out_flag: state.sold_out.is_flagged(voucher_id),
        refused_locally: state.sold_out.refused_locally(voucher_id),
    })
}
