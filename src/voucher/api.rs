//! `/api/list_vouchers`: the newest vouchers with their units left, and
//! `/api/shop_settings`: what every price is counted in. Creating and
//! warming one are the sale's (`sale::launch`): they put it on sale in Redis.

use super::{ShopConfig, Voucher};
use crate::error::AppResult;
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    super::{left::units_left, store},
    crate::backend::Backend,
};

/// How many vouchers `list_vouchers` returns (newest first).
#[cfg(feature = "ssr")]
const LIST_LIMIT: i64 = 100;

/// The newest vouchers with their window and remaining stock.
#[server(prefix = "/api", endpoint = "list_vouchers", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn list_vouchers() -> AppResult<Vec<Voucher>> {
    let backend = expect_context::<Backend>();
    let rows = store::list(&backend.db, LIST_LIMIT).await?;
    let left = units_left(&backend, &rows).await?;
    Ok(rows.iter().zip(left).map(|(row, left)| row.to_voucher(left)).collect())
}

/// The shop's settings: the currency of every price, and its decimals.
#[server(prefix = "/api", endpoint = "shop_settings", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn shop_settings() -> AppResult<ShopConfig> {
    let currency = crate::money::currency();
    Ok(ShopConfig { currency: currency.to_owned(), minor_digits: crate::money::minor_digits(currency) })
}
