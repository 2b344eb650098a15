//! `/api/sale_stats`: one voucher's numbers on request, for operators and load tools
//! (the dashboard gets the same numbers pushed by the feed).

use super::SaleFigures;
use crate::error::AppResult;
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use super::context::Context;
#[cfg(feature = "ssr")]
use crate::{auth::caller::operator, error::ErrorCode, voucher::store as vouchers};

/// The operator's numbers for one voucher (operators): the figures the dashboard shows
/// (`live::figures`), and this process's sold-out flag.
#[server(prefix = "/api", endpoint = "sale_stats", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn sale_stats(voucher_id: i64) -> AppResult<SaleFigures> {
    let state = Context::get();
    operator::<SaleStats>()?;
    let backend = &state.backend;
    let voucher = vouchers::get(&backend.db, voucher_id).await?.ok_or(ErrorCode::UnknownVoucher)?;
    let figures = super::figures::read(backend, std::slice::from_ref(&voucher)).await?;
    let mut f = figures.into_iter().next().unwrap_or_default();
    f.sold_out_flag = state.sold_out.is_flagged(voucher_id);
    f.refused_locally = state.sold_out.refused_locally(voucher_id);
    Ok(f)
}
crate::error::refuses!(SaleStats: UnknownVoucher);
