//! Orders: granted by the gate into their sale's stream (`entry`: the entry's format),
//! persisted from there into SQL by the worker (`worker`); an order that can never be
//! persisted fails (`fail`) and what it held is given back. A persisted order is paid,
//! or cancelled (by its shopper, or by the sweeper when its payment deadline passes)
//! and its unit given back (`give_back`). Where a grab stands before its order is
//! saved is the grab result (`results`), written by the gate and the worker.

pub mod api;

#[cfg(feature = "ssr")]
pub mod entry;
#[cfg(feature = "ssr")]
pub mod export;
#[cfg(feature = "ssr")]
pub mod fail;
#[cfg(feature = "ssr")]
pub mod give_back;
#[cfg(feature = "ssr")]
pub mod lifecycle;
#[cfg(feature = "ssr")]
pub mod results;
#[cfg(feature = "ssr")]
pub mod settle;
#[cfg(feature = "ssr")]
pub mod snapshot;
#[cfg(feature = "ssr")]
pub mod store;
#[cfg(feature = "ssr")]
pub mod sweeper;
#[cfg(feature = "ssr")]
pub mod unsettled;
pub mod view;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Why a granted grab ended without an order: `grab_result`'s `reason`, a closed list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailReason {
    /// The shopper already holds another order for the voucher.
    AlreadyBought,
    /// The database had no unit left for it.
    SoldOut,
    /// The database kept refusing the order; it went to the dead-letter stream.
    DeadLetter,
    /// Redis lost the grab (a restart without persistence, or a failover) before the
    /// worker saved it. The shopper may grab again. `grab_result` infers it, and buries
    /// the order with this reason (a dead letter) before it answers, so a late save
    /// cannot revive it.
    Lost,
}

impl FailReason {
    #[cfg(feature = "ssr")]
    const ALL: [Self; 4] = [Self::AlreadyBought, Self::SoldOut, Self::DeadLetter, Self::Lost];

    #[cfg(feature = "ssr")]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AlreadyBought => "already_bought",
            Self::SoldOut => "sold_out",
            Self::DeadLetter => "dead_letter",
            Self::Lost => "lost",
        }
    }

    #[cfg(feature = "ssr")]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

/// A persisted order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Order {
    pub order_id: String,
    pub voucher_id: i64,
    pub user_id: i64,
    /// The voucher's title.
    pub title: String,
    #[serde(deserialize_with = "OrderStatus::read")]
    pub status: OrderStatus,
    /// When it was granted (to the second).
    #[serde(deserialize_with = "crate::rfc3339::deserialize")]
    pub created_at: DateTime<Utc>,
    /// An order still unpaid at this moment is cancelled.
    #[serde(deserialize_with = "crate::rfc3339::deserialize")]
    pub pay_deadline: DateTime<Utc>,
    /// Why a cancelled order was cancelled.
    #[serde(deserialize_with = "CancelReason::read", default)]
    #[schema(required = true)]
    pub cancel_reason: Option<CancelReason>,
    /// What the shopper pays (paid), in minor units of `currency`: the voucher's price
    /// when the order was granted.
    #[serde(default)]
    #[schema(required = true)]
    pub price: i64,
    #[serde(default)]
    #[schema(required = true)]
    pub currency: String,
}

/// Where a persisted order stands: `unpaid`, then `paid` or `cancelled`, nothing else.
/// The names are API and what the database's `status` column holds. Read from JSON as
/// text, then by name ([`OrderStatus::read`]): serde's own enum reader grew the
/// browser's WASM, which already holds the text reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    Unpaid,
    Paid,
    Cancelled,
}

impl OrderStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unpaid => "unpaid",
            Self::Paid => "paid",
            Self::Cancelled => "cancelled",
        }
    }

    /// Every status, in the order an order goes through them.
    pub const ALL: [Self; 3] = [Self::Unpaid, Self::Paid, Self::Cancelled];

    /// The status a name stands for (`None` for any other text).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == name)
    }

    /// Reads a status from its name.
    fn read<'de, D: serde::Deserializer<'de>>(from: D) -> Result<Self, D::Error> {
        let name = String::deserialize(from)?;
        Self::parse(&name).ok_or_else(|| serde::de::Error::custom("an unknown order status"))
    }
}

/// Why an unpaid order was cancelled. The names are API (`cancel_reason`) and what the
/// database holds; read like [`OrderStatus`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
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
        match name {
            "timeout" => Some(Self::Timeout),
            "shopper" => Some(Self::Shopper),
            _ => None,
        }
    }

    /// Reads a reason from its name, or none from `null`.
    fn read<'de, D: serde::Deserializer<'de>>(from: D) -> Result<Option<Self>, D::Error> {
        let Some(name) = Option::<String>::deserialize(from)? else { return Ok(None) };
        Self::parse(&name).map(Some).ok_or_else(|| serde::de::Error::custom("an unknown cancel reason"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_reads_back_as_written_and_refuses_unknown_names() {
        let at = DateTime::from_timestamp_millis(1_764_000_000_000).unwrap();
        let order = Order {
            order_id: "42".into(),
            voucher_id: 1,
            user_id: 2,
            title: "Tea".into(),
            status: OrderStatus::Cancelled,
            created_at: at,
            pay_deadline: at,
            cancel_reason: Some(CancelReason::Timeout),
            price: 1999,
            currency: "EUR".into(),
        };
        let json = serde_json::to_value(&order).unwrap();
        assert_eq!((json["status"].as_str(), json["cancel_reason"].as_str()), (Some("cancelled"), Some("timeout")));
        assert_eq!(serde_json::from_value::<Order>(json.clone()).unwrap(), order);
        let unpaid = Order { status: OrderStatus::Unpaid, cancel_reason: None, ..order };
        assert_eq!(serde_json::from_value::<Order>(serde_json::to_value(&unpaid).unwrap()).unwrap(), unpaid);
        for (field, name) in [("status", "lost"), ("cancel_reason", "bored")] {
            let mut bad = json.clone();
            bad[field] = name.into();
            assert!(serde_json::from_value::<Order>(bad).is_err(), "{field}: {name}");
        }
    }
}
