//! `/api/sale_stats`: one voucher's numbers on request, for operators and load tools
//! (the dashboard gets the same numbers pushed by the feed).

use super::SaleFigures;
use crate::error::AppResult;
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    crate::{
        auth::session::require_admin, error::ErrorCode, orders::store as orders, sale::keys::GROUP, state::AppState,
        voucher::store as vouchers,
    },
    redis::AsyncCommands,
};

/// The operator's numbers for one voucher (admin).
#[server(prefix = "/api", endpoint = "sale_stats", input = Json)]
pub async fn sale_stats(voucher_id: i64) -> AppResult<SaleFigures> {
    let state = expect_context::<AppState>();
    require_admin(&state.secrets)?;
    let backend = &state.backend;
    let voucher = vouchers::get(&backend.db, voucher_id).await?.ok_or(ErrorCode::UnknownVoucher)?;
    let persisted = orders::persisted(&backend.db, voucher_id).await?;
    let keys = backend.keys(voucher_id);
    let mut redis = backend.redis.clone();
    let (redis_stock, granted, stream_length, dead_letters): (Option<i64>, i64, i64, i64) = redis::pipe()
        .get(&keys.stock)
        .scard(&keys.buyers)
        .xlen(&keys.orders)
        .xlen(&keys.dlq)
        .query_async(&mut redis)
        .await?;
    // NOGROUP (Redis lost the voucher) means nothing is pending; other errors are errors.
    let pending = match redis.xpending::<_, _, redis::streams::StreamPendingReply>(&keys.orders, GROUP).await {
        Ok(p) => p.count() as i64,
        Err(e) if e.code() == Some("NOGROUP") => 0,
        Err(e) => return Err(e.into()),
    };
    Ok(SaleFigures {
        voucher_id,
        total_stock: voucher.stock,
        redis_stock,
        granted,
        persisted,
        unpaid: (persisted - voucher.paid).max(0),
        paid: voucher.paid,
        cancelled: voucher.cancelled,
        stream_length,
        pending,
        dead_letters,
        sold_out_flag: state.sold_out.is_flagged(voucher_id),
        refused_locally: state.sold_out.refused_locally(voucher_id),
    })
}
