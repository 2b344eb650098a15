//! `/api/list_vouchers`: the newest vouchers with their units left, and
//! `/api/shop_settings`: what every price is counted in. Creating and
//! warming one are the sale's (`sale::launch`): they put it on sale in Redis.

use super::{ShopConfig, Voucher};
use crate::{error::AppResult, listing::Page};
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    super::{left::units_left, store},
    crate::{backend::Backend, listing::Paging},
};

/// Vouchers a page of `list_vouchers` holds unless asked: 100, and at most.
#[cfg(feature = "ssr")]
pub const LIST_PAGE: crate::listing::PageSize = crate::listing::PageSize { default: 100, most: 100 };

/// The vouchers with their window and remaining stock, newest first, a page at a time:
/// `limit` 1–100 (100 when absent), `after` the `next` of the page before.
#[server(prefix = "/api", endpoint = "list_vouchers", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn list_vouchers(limit: Option<i64>, after: Option<String>) -> AppResult<Page<Voucher>> {
    let backend = expect_context::<Backend>();
    let paging = Paging::asked(limit, after.as_deref(), LIST_PAGE)?;
    let rows = paging.page(store::list(&backend.db, paging.before, paging.rows()).await?, |row| row.id);
    let left = units_left(&backend, &rows.items).await?;
    let items = rows.items.iter().zip(left).map(|(row, left)| row.to_voucher(left)).collect();
    Ok(Page { items, has_more: rows.has_more, next: rows.next })
}
crate::error::refuses!(ListVouchers:);

/// The shop's settings: the currency of every price, and its decimals.
#[server(prefix = "/api", endpoint = "shop_settings", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn shop_settings() -> AppResult<ShopConfig> {
    let currency = crate::money::currency();
    Ok(ShopConfig { currency: currency.to_owned(), minor_digits: crate::money::minor_digits(currency) })
}
crate::error::refuses!(ShopSettings:);
