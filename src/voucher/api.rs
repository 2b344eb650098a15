//! `/api/list_vouchers`: the newest vouchers with their remaining stock, and
//! `/api/shop_settings`: what every price is counted in. Creating and
//! warming one are the sale's (`sale::admin`): they put it in Redis.

use super::{ShopConfig, Voucher};
use crate::error::AppResult;
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    super::{store, store::VoucherRow},
    crate::{backend::Backend, state::AppState},
};

/// How many vouchers `list_vouchers` returns (newest first).
#[cfg(feature = "ssr")]
const LIST_LIMIT: i64 = 100;

/// How long the list waits for Redis's stock counts before showing the database's.
/// Redis answers in well under a millisecond; one that stalls (a failover, a slow
/// script) must not hold up the shop page, which renders the list before it is sent.
#[cfg(feature = "ssr")]
const STOCK_DEADLINE: std::time::Duration = std::time::Duration::from_millis(250);

/// The newest vouchers with their window and remaining stock.
#[server(prefix = "/api", endpoint = "list_vouchers", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn list_vouchers() -> AppResult<Vec<Voucher>> {
    let state = expect_context::<AppState>();
    let rows = store::list(&state.backend.db, LIST_LIMIT).await?;
    let remaining = remaining(&state.backend, &rows).await?;
    Ok(rows.iter().zip(remaining).map(|(row, left)| to_voucher(row, left)).collect())
}

/// The shop's settings: the currency of every price, and its decimals.
#[server(prefix = "/api", endpoint = "shop_settings", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn shop_settings() -> AppResult<ShopConfig> {
    let currency = crate::money::currency();
    Ok(ShopConfig { currency: currency.to_owned(), minor_digits: crate::money::minor_digits(currency) })
}

/// Remaining stock of each voucher: Redis's count, or the database's where Redis
/// does not hold the voucher or does not answer for it within [`STOCK_DEADLINE`] (a
/// node failing over). GETs sent at once, not an MGET: the keys live in different
/// Cluster slots.
#[cfg(feature = "ssr")]
pub(crate) async fn remaining(backend: &Backend, rows: &[VoucherRow]) -> AppResult<Vec<i64>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let gets = rows.iter().map(|r| redis::Cmd::get(&backend.keys(r.id).left));
    let counts = tokio::time::timeout(STOCK_DEADLINE, backend.redis.query_each::<Option<i64>>(gets)).await;
    let counts = counts.unwrap_or_else(|_| {
        tracing::warn!("voucher list: Redis did not answer within {STOCK_DEADLINE:?}; showing the database's stock");
        Vec::new()
    });
    let redis_count = |i: usize| counts.get(i).and_then(|c| c.as_ref().ok().copied().flatten());
    Ok(rows.iter().enumerate().map(|(i, row)| redis_count(i).unwrap_or(row.stock_left)).collect())
}

#[cfg(feature = "ssr")]
pub(crate) fn to_voucher(row: &VoucherRow, remaining: i64) -> Voucher {
    Voucher {
        id: row.id,
        title: row.title.clone(),
        stock: row.stock,
        remaining: remaining.max(0),
        begins_at: row.begins(),
        ends_at: row.ends(),
        price: row.price,
        face_value: row.face_value,
        currency: crate::money::currency().to_owned(),
        paused: row.is_paused(),
        fair_start: row.has_fair_start(),
    }
}
