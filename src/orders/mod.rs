//! Orders: persisted from the voucher streams into SQL by the worker; an order that
//! can never be persisted is ended and what it held given back. A persisted order is
//! paid, or cancelled (by its shopper, or by the sweeper when its payment deadline
//! passes) and its unit given back.

pub mod api;

#[cfg(feature = "ssr")]
pub mod give_back;
#[cfg(feature = "ssr")]
pub mod lifecycle;
#[cfg(feature = "ssr")]
pub mod restock;
#[cfg(feature = "ssr")]
pub mod settle;
#[cfg(feature = "ssr")]
pub mod store;
#[cfg(feature = "ssr")]
pub mod sweeper;
pub mod view;
#[cfg(feature = "ssr")]
pub mod worker;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A persisted order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    pub order_id: String,
    pub voucher_id: i64,
    pub user_id: i64,
    /// The voucher's title.
    pub title: String,
    /// `unpaid`, `paid` or `cancelled`.
    pub status: String,
    /// When it was granted (to the second).
    #[serde(deserialize_with = "crate::rfc3339::deserialize")]
    pub created_at: DateTime<Utc>,
    /// An order still unpaid at this moment is cancelled.
    #[serde(deserialize_with = "crate::rfc3339::deserialize")]
    pub pay_deadline: DateTime<Utc>,
    /// Why a cancelled order was cancelled: `timeout` or `shopper`.
    pub cancel_reason: Option<String>,
}
