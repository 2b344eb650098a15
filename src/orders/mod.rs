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
    pub status: OrderStatus,
    /// When it was granted (to the second).
    #[serde(deserialize_with = "crate::rfc3339::deserialize")]
    pub created_at: DateTime<Utc>,
    /// An order still unpaid at this moment is cancelled.
    #[serde(deserialize_with = "crate::rfc3339::deserialize")]
    pub pay_deadline: DateTime<Utc>,
    /// Why a cancelled order was cancelled.
    pub cancel_reason: Option<CancelReason>,
}

/// Where a persisted order stands: `unpaid`, then `paid` or `cancelled`, nothing else.
/// The names are API and what the database's `status` column holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    Unpaid,
    Paid,
    Cancelled,
}

impl OrderStatus {
    pub const ALL: [Self; 3] = [Self::Unpaid, Self::Paid, Self::Cancelled];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unpaid => "unpaid",
            Self::Paid => "paid",
            Self::Cancelled => "cancelled",
        }
    }

    /// The status a name stands for (`None` for any other text).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// Why an unpaid order was cancelled. The names are API (`cancel_reason`) and what the
/// database holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelReason {
    /// The payment deadline passed (the sweeper).
    Timeout,
    /// The shopper cancelled it.
    Shopper,
}

impl CancelReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Shopper => "shopper",
        }
    }

    /// The reason a name stands for (`None` for any other text).
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Timeout, Self::Shopper].into_iter().find(|r| r.as_str() == name)
    }
}
