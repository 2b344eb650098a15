//! Voucher endpoints: `/api/create_voucher`, `/api/warm_up`, `/api/list_vouchers`.

use super::Voucher;
use crate::error::AppResult;
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    super::{store, store::VoucherRow, warm, NewVoucher},
    crate::{auth::session::require_admin, backend::Backend, bus::SaleEvent, error::ErrorCode, state::AppState},
};

/// How many vouchers `list_vouchers` returns (newest first).
#[cfg(feature = "ssr")]
const LIST_LIMIT: i64 = 100;

/// How long the list waits for Redis's stock counts before showing the database's.
/// Redis answers in well under a millisecond; one that stalls (a failover, a slow
/// script) must not hold up the shop page, which renders the list before it is sent.
#[cfg(feature = "ssr")]
const STOCK_DEADLINE: std::time::Duration = std::time::Duration::from_millis(250);

/// Creates a voucher and warms it into Redis (admin). Times are RFC 3339.
#[server(prefix = "/api", endpoint = "create_voucher", input = Json)]
pub async fn create_voucher(title: String, stock: i64, begins_at: String, ends_at: String) -> AppResult<Voucher> {
    let state = expect_context::<AppState>();
    require_admin(&state.secrets)?;
    let new = NewVoucher::parse(&title, stock, &begins_at, &ends_at, chrono::Utc::now())?;
    let row = store::insert(&state.backend.db, &new).await?;
    warm::warm(&state.backend, &row).await?;
    changed(&state, row.id).await;
    tracing::info!(voucher = row.id, stock = row.stock, "voucher created");
    Ok(to_voucher(&row, row.stock_left))
}

/// Loads a voucher into Redis (admin). Idempotent: stock Redis already holds is never
/// reset; when Redis lost it, stock and buyers are rebuilt from the database.
#[server(prefix = "/api", endpoint = "warm_up", input = Json)]
pub async fn warm_up(voucher_id: i64) -> AppResult<Voucher> {
    let state = expect_context::<AppState>();
    require_admin(&state.secrets)?;
    let row = store::get(&state.backend.db, voucher_id).await?.ok_or(ErrorCode::UnknownVoucher)?;
    warm::warm(&state.backend, &row).await?;
    changed(&state, row.id).await;
    let remaining = remaining(&state.backend, std::slice::from_ref(&row)).await?;
    Ok(to_voucher(&row, remaining[0]))
}

/// The newest vouchers with their window and remaining stock.
#[server(prefix = "/api", endpoint = "list_vouchers", input = Json)]
pub async fn list_vouchers() -> AppResult<Vec<Voucher>> {
    let state = expect_context::<AppState>();
    let rows = store::list(&state.backend.db, LIST_LIMIT).await?;
    let remaining = remaining(&state.backend, &rows).await?;
    Ok(rows.iter().zip(remaining).map(|(row, left)| to_voucher(row, left)).collect())
}

/// Puts the shared shop page (`server::page_cache`) out of date: this process's at
/// once (the admin's next page shows the change), every other's when it hears the
/// sale event, a moment later.
#[cfg(feature = "ssr")]
async fn changed(state: &AppState, voucher_id: i64) {
    state.voucher_changes.note();
    let origin = state.voucher_changes.origin();
    state.backend.announce(SaleEvent::VoucherChanged { voucher_id, origin }).await;
}

/// Remaining stock of each voucher: Redis's count, or the database's where Redis
/// does not hold the voucher or does not answer for it within [`STOCK_DEADLINE`] (a
/// node failing over). GETs sent at once, not an MGET: the keys live in different
/// Cluster slots.
#[cfg(feature = "ssr")]
async fn remaining(backend: &Backend, rows: &[VoucherRow]) -> AppResult<Vec<i64>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let gets = rows.iter().map(|r| redis::Cmd::get(&backend.keys(r.id).stock));
    let counts = tokio::time::timeout(STOCK_DEADLINE, backend.redis.query_each::<Option<i64>>(gets)).await;
    let counts = counts.unwrap_or_else(|_| {
        tracing::warn!("voucher list: Redis did not answer within {STOCK_DEADLINE:?}; showing the database's stock");
        Vec::new()
    });
    let redis_count = |i: usize| counts.get(i).and_then(|c| c.as_ref().ok().copied().flatten());
    Ok(rows.iter().enumerate().map(|(i, row)| redis_count(i).unwrap_or(row.stock_left)).collect())
}

#[cfg(feature = "ssr")]
fn to_voucher(row: &VoucherRow, remaining: i64) -> Voucher {
    Voucher {
        id: row.id,
        title: row.title.clone(),
        stock: row.stock,
        remaining: remaining.max(0),
        begins_at: row.begins(),
        ends_at: row.ends(),
    }
}
