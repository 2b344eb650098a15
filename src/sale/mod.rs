//! The sale: the Lua gate that decides a grab in one Redis step, the grab and result
//! endpoints, the operator's numbers, and the shopper's page.

pub mod api;
#[cfg(feature = "ssr")]
pub mod gate;
#[cfg(feature = "ssr")]
pub mod keys;
#[cfg(feature = "ssr")]
pub mod sold_out;
pub mod view;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The answer to a granted grab: the order id, at once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrabTicket {
    /// 64-bit id as a decimal string (JavaScript numbers lose precision above 2^53).
    pub order_id: String,
    /// Always "queued": the order is persisted asynchronously.
    pub status: GrabStatus,
}

/// Where a granted grab stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrabStatus {
    Queued,
    Success,
    Failed,
}

impl GrabStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Success => "success",
            Self::Failed => "failed",
        }
    }
}

/// The answer to `grab_result`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrabState {
    pub status: GrabStatus,
    /// Why it failed (only when failed).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<String>,
    /// The persisted order (only when success).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub order: Option<Order>,
}

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

/// The operator's numbers for one voucher.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaleFigures {
    pub voucher_id: i64,
    /// Units put on sale.
    pub total_stock: i64,
    /// Units Redis still holds; `None` when Redis does not hold the voucher.
    pub redis_stock: Option<i64>,
    /// Shoppers the gate granted an order (the buyers set).
    pub granted: i64,
    /// Orders in the database.
    pub persisted: i64,
    /// Entries in the order stream.
    pub stream_length: i64,
    /// Entries read by a worker but not yet acknowledged.
    pub pending: i64,
    /// Orders given up after too many deliveries.
    pub dead_letters: i64,
    /// This process holds a sold-out flag for the voucher (answers without Redis).
    pub sold_out_flag: bool,
    /// Grabs this process refused from its sold-out flag, without asking Redis.
    pub refused_locally: u64,
}

/// A stored result: `status:user[:reason]`.
#[cfg(feature = "ssr")]
pub fn parse_result(raw: &str) -> Option<(GrabStatus, i64, Option<String>)> {
    let mut parts = raw.splitn(3, ':');
    let status = match parts.next()? {
        "queued" => GrabStatus::Queued,
        "success" => GrabStatus::Success,
        "failed" => GrabStatus::Failed,
        _ => return None,
    };
    let user = parts.next()?.parse().ok()?;
    Some((status, user, parts.next().map(str::to_owned)))
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

    #[test]
    fn stored_results_parse() {
        assert_eq!(parse_result("queued:7"), Some((GrabStatus::Queued, 7, None)));
        assert_eq!(
            parse_result("failed:7:dead letter: db down"),
            Some((GrabStatus::Failed, 7, Some("dead letter: db down".into())))
        );
        assert_eq!(parse_result("weird:7"), None);
        assert_eq!(parse_result("success:x"), None);
    }
}
