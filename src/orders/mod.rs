//! Orders: persisted from the voucher streams into SQL by the worker; an order that
//! can never be persisted is ended and what it held given back.

#[cfg(feature = "ssr")]
pub mod give_back;
#[cfg(feature = "ssr")]
pub mod settle;
#[cfg(feature = "ssr")]
pub mod store;
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
    /// unpaid, paid or cancelled.
    pub status: String,
    pub created_at: DateTime<Utc>,
}
