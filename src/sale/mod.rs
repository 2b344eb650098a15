//! The sale: a voucher's units being sold in its window. Warm-up (`warm`: Redis made
//! to hold the sale as the database has it), the Lua gate that decides a grab in one
//! Redis step (`gate`, handed the grabs that arrive together by `batches`), the grab and result endpoints (`api`, `hot_path`, `grab`),
//! putting a voucher on sale (`launch`) and running the sale (`run`, `stock`,
//! `upkeep`) with their components (`operator_view`), this process's sold-out flags,
//! and the shopper's sale card (`view`). A sale may be split over several shards
//! (`refill`: the moves that refill a dry bucket; `voucher::buckets`: how many a sale
//! has).

#[cfg(feature = "ssr")]
pub mod admission;
pub mod api;
#[cfg(feature = "ssr")]
pub mod batches;
#[cfg(any(test, feature = "hydrate"))]
pub mod card;
#[cfg(feature = "ssr")]
mod change;
#[cfg(feature = "hydrate")]
pub mod clock;
#[cfg(feature = "ssr")]
pub mod context;
pub mod early;
#[cfg(feature = "ssr")]
pub mod gate;
#[cfg(feature = "ssr")]
pub mod grab;
#[cfg(feature = "ssr")]
pub mod hot_path;
pub mod launch;
pub mod operator_view;
#[cfg(feature = "ssr")]
pub mod rebuilds;
#[cfg(feature = "ssr")]
pub mod receipt;
#[cfg(feature = "ssr")]
pub use grab::REDIS_DEADLINE;
#[cfg(feature = "ssr")]
pub mod refill;
pub mod run;
#[cfg(feature = "ssr")]
pub mod sold_out;
#[cfg(feature = "ssr")]
pub mod stock;
#[cfg(feature = "ssr")]
pub mod upkeep;
pub mod view;
#[cfg(feature = "ssr")]
pub mod warm;

use crate::{
    orders::{FailReason, Order},
    wire::{self, FromJson},
};
use serde::{Deserialize, Serialize};

/// The answer to `grab_token`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct IssuedToken {
    pub token: String,
}

/// The answer to `server_time`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct GateTime {
    /// The gate's clock, Unix milliseconds.
    pub now_ms: i64,
}

/// The answer to `add_stock` and `withdraw_stock`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StockChanged {
    /// Units added or withdrawn.
    pub units: i64,
    /// The voucher after the change.
    pub voucher: crate::voucher::Voucher,
}

/// The answer to a granted grab: the order id, at once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct GrabTicket {
    /// 64-bit id as a decimal string (JavaScript numbers lose precision above 2^53).
    pub order_id: String,
    /// Always `queued`: the order is saved after the answer (ask `grab_result`).
    pub status: Queued,
    /// Proof that this order id was granted to this shopper: send it with
    /// `grab_result`, which declares a grant Redis lost only to the shopper who holds
    /// its receipt (anybody can guess an id; nobody can make another's receipt).
    pub receipt: String,
}

/// The answer to `grab_result`: where a granted grab stands, tagged by `status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum GrabState {
    /// Granted; the order is being saved: ask again.
    #[schema(title = "GrabQueued")]
    Queued,
    /// Saved: the shopper's order.
    #[schema(title = "GrabSucceeded")]
    Success { order: Box<Order> },
    /// Granted, but it will never be an order.
    #[schema(title = "GrabFailed")]
    Failed { reason: FailReason },
}

#[cfg(any(test, feature = "hydrate"))]
impl GrabState {
    const SUCCESS: &str = "success";

    /// The state's name, as `status` carries it.
    #[cfg(feature = "hydrate")]
    pub fn status(&self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Success { .. } => Self::SUCCESS,
            Self::Failed { .. } => "failed",
        }
    }
}

impl FromJson for IssuedToken {
    fn from_json(json: &impl wire::Json) -> Option<Self> {
        Some(Self { token: json.text_at("token")? })
    }
}

impl FromJson for GateTime {
    fn from_json(json: &impl wire::Json) -> Option<Self> {
        Some(Self { now_ms: json.int_at("now_ms")? })
    }
}

impl FromJson for GrabTicket {
    fn from_json(json: &impl wire::Json) -> Option<Self> {
        let status = (json.text_at("status")? == "queued").then_some(Queued::Queued)?;
        Some(Self { order_id: json.text_at("order_id")?, status, receipt: json.text_at("receipt")? })
    }
}

/// Where a grab stands as the shop's card says it: `grab_result`'s `status`, and a
/// failure's `reason` (the order itself is for My orders to show).
#[cfg(any(test, feature = "hydrate"))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrabProgress {
    pub status: String,
    pub reason: Option<String>,
}

#[cfg(any(test, feature = "hydrate"))]
impl GrabProgress {
    #[cfg(feature = "hydrate")]
    pub fn queued() -> Self {
        Self { status: GrabState::Queued.status().to_owned(), reason: None }
    }

    /// Where the shopper's saved order stands, as the card says it: a success while
    /// it waits for payment, then paid, or cancelled and why ("cancelled (timeout)").
    /// My orders lists the orders; the card follows its own there, so it neither keeps
    /// saying "success" of an order that lapsed nor, on a page opened again, forgets
    /// the order its shopper holds.
    pub fn of_order(order: &Order) -> Self {
        let status = match order.status {
            crate::orders::OrderStatus::Unpaid => GrabState::SUCCESS,
            status => status.as_str(),
        };
        Self { status: status.to_owned(), reason: order.cancel_reason.map(|r| r.as_str().to_owned()) }
    }

    /// "queued", "success", "failed (sold_out)", "cancelled (shopper)".
    pub fn text(&self) -> String {
        match &self.reason {
            Some(reason) => format!("{} ({reason})", self.status),
            None => self.status.clone(),
        }
    }
}

#[cfg(any(test, feature = "hydrate"))]
impl FromJson for GrabProgress {
    fn from_json(json: &impl wire::Json) -> Option<Self> {
        Some(Self { status: json.text_at("status")?, reason: json.maybe("reason", wire::Json::text)? })
    }
}

/// A granted grab's state when it is answered: always queued, the one value a
/// `GrabTicket`'s `status` has (the later states are `GrabState`'s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Queued {
    Queued,
}
