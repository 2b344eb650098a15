//! The live feed: one sampler per server process reads every live voucher's numbers a
//! few times a second and fans them out to every open dashboard over Server-Sent
//! Events (`GET /api/live`); sale events (sold out, restocked, dead-lettered, worker
//! joined or left) arrive through Redis pub/sub and are pushed the moment they happen.
//! A thousand open dashboards cost one sampler, not a thousand. `sale_stats` gives one
//! voucher's numbers on request, computed as the sampler's are (`figures`).

pub mod api;
#[cfg(feature = "ssr")]
pub mod context;
#[cfg(feature = "ssr")]
pub mod figures;
#[cfg(feature = "ssr")]
pub mod hub;
#[cfg(feature = "ssr")]
pub mod sampler;
#[cfg(feature = "ssr")]
pub mod slots;
#[cfg(feature = "ssr")]
pub mod sse;
pub mod view;

use crate::wire::{self, FromJson};
use serde::{Deserialize, Serialize};

/// The feed's path, written once for the server's route and the browser's
/// `EventSource`s.
macro_rules! feed_path {
    () => {
        "/api/live"
    };
}

/// The live feed's path: routed by the server, and kept out of the request cap and
/// timeout by its front door (a feed stays open); the operator's dashboard opens it.
pub const FEED_PATH: &str = feed_path!();
/// The shop page's public stock feed.
#[cfg(feature = "hydrate")]
pub const SHOP_FEED_PATH: &str = concat!(feed_path!(), "?view=shop");

/// One voucher's numbers at one moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct VoucherLive {
    pub voucher_id: i64,
    /// Units put on sale.
    // The feed's names, from before `stock` meant only this: `total` and `stock`.
    #[serde(rename = "total")]
    pub stock: i64,
    /// Units left, as Redis holds them (-1 when Redis does not hold the voucher; a sale
    /// of several shards reading empty keeps its last figure until its sell-out is
    /// known: a unit may be moving between its buckets).
    #[serde(rename = "stock")]
    pub left: i64,
    /// Shoppers granted an order (the buyers set).
    pub granted: i64,
    /// Orders in the database.
    pub persisted: i64,
    /// Entries in the order stream.
    pub stream_length: i64,
    /// Entries not yet delivered to any worker (counted up to 1,000 per bucket of the
    /// sale; -1 if unknown).
    pub lag: i64,
    /// Entries delivered to a worker but not yet acknowledged.
    pub pending: i64,
    /// Orders given up after too many deliveries.
    pub dead_letters: i64,
    /// Grabs granted per second, all processes.
    pub grabs_per_s: f64,
    /// Grabs the gate refused per second, all processes.
    pub refused_per_s: f64,
    /// Grabs this process refused from its sold-out flag, per second.
    pub refused_locally_per_s: f64,
    /// Orders persisted per second.
    pub orders_per_s: f64,
    /// Orders awaiting payment, paid, and cancelled (their units given back).
    pub unpaid: i64,
    pub paid: i64,
    pub cancelled: i64,
    /// This process holds a sold-out flag for the voucher.
    pub sold_out: bool,
    /// Paused by an operator, and when the sale starts and ends (Unix ms), as the gate
    /// sees them.
    #[serde(default)]
    #[schema(required = true)]
    pub paused: bool,
    #[serde(default)]
    #[schema(required = true)]
    pub begins_at_ms: i64,
    #[serde(default)]
    #[schema(required = true)]
    pub ends_at_ms: i64,
    /// A sale of several shards: units left in each bucket (-1: one Redis lost).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buckets_left: Vec<i64>,
    /// When the figures Redis gives (`stock`, `granted`, the stream's, dead letters,
    /// refusals) were read, Unix ms: the snapshot's `at_ms`, unless the sale's
    /// buckets did not all answer within a second; then what they showed last, read
    /// then (0: not yet read).
    #[serde(default)]
    #[schema(required = true)]
    pub redis_at_ms: i64,
}

/// All live vouchers at one moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Snapshot {
    /// Unix milliseconds, by the gate's clock (Redis TIME).
    pub at_ms: i64,
    pub vouchers: Vec<VoucherLive>,
    /// Grabs this process let through to the gate, and shed (answered `unavailable`
    /// at once: past what it can serve), per second.
    #[serde(default)]
    #[schema(required = true)]
    pub admitted_per_s: f64,
    #[serde(default)]
    #[schema(required = true)]
    pub shed_per_s: f64,
    /// When the figures the database gives (the list of sales, `persisted`, `unpaid`,
    /// `paid`, `cancelled`) were read, Unix ms: `at_ms`, unless the database did not
    /// answer within a second; then those it gave last, read then.
    #[serde(default)]
    #[schema(required = true)]
    pub database_at_ms: i64,
}

/// What a shopper's page needs: units left, and the window as the gate sees it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StockLive {
    pub voucher_id: i64,
    /// Units put on sale.
    // The feed's names, as in `VoucherLive`.
    #[serde(rename = "total")]
    pub stock: i64,
    /// Units left (-1 when Redis does not hold the voucher).
    #[serde(rename = "stock")]
    pub left: i64,
    pub sold_out: bool,
    /// Paused by an operator, and when the sale starts and ends (Unix ms; an operator
    /// may have moved them), as the gate sees them.
    #[serde(default)]
    #[schema(required = true)]
    pub paused: bool,
    #[serde(default)]
    #[schema(required = true)]
    pub begins_at_ms: i64,
    #[serde(default)]
    #[schema(required = true)]
    pub ends_at_ms: i64,
}

impl Snapshot {
    /// The shopper's view of this snapshot.
    #[cfg(feature = "ssr")]
    pub fn stock_only(&self) -> Vec<StockLive> {
        self.vouchers
            .iter()
            .map(|v| StockLive {
                voucher_id: v.voucher_id,
                stock: v.stock,
                left: v.left,
                sold_out: v.sold_out || v.left == 0,
                paused: v.paused,
                begins_at_ms: v.begins_at_ms,
                ends_at_ms: v.ends_at_ms,
            })
            .collect()
    }
}

/// Something that happened, pushed at once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LiveEvent {
    /// Unix milliseconds (when this process heard of it).
    pub at_ms: i64,
    pub kind: EventKind,
    #[schema(required = true)]
    pub voucher_id: Option<i64>,
    /// Order id or worker name, when the event has one.
    #[schema(required = true)]
    pub detail: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    SoldOut,
    Restocked,
    DeadLettered,
    WorkerJoined,
    WorkerLeft,
}

impl LiveEvent {
    /// A line for the event log.
    pub fn describe(&self) -> String {
        let v = self.voucher_id.map(|id| format!("voucher #{id}")).unwrap_or_default();
        let d = self.detail.clone().unwrap_or_default();
        match self.kind {
            EventKind::SoldOut => format!("Sold out: {v}"),
            EventKind::Restocked => format!("Restocked: {v}"),
            EventKind::DeadLettered => format!("Dead-lettered: order {d} of {v}"),
            EventKind::WorkerJoined => format!("Worker joined: {d}"),
            EventKind::WorkerLeft => format!("Worker left: {d}"),
        }
    }

    /// The feed's form of a sale event heard at `at_ms`; `None` for one the feeds do
    /// not show (a voucher changed: the lists refresh on their own).
    #[cfg(feature = "ssr")]
    pub fn from_sale(event: &crate::bus::SaleEvent, at_ms: i64) -> Option<Self> {
        use crate::bus::SaleEvent as E;
        let (kind, voucher_id, detail) = match event {
            E::SoldOut { voucher_id } => (EventKind::SoldOut, Some(*voucher_id), None),
            E::Restocked { voucher_id } => (EventKind::Restocked, Some(*voucher_id), None),
            E::DeadLettered { voucher_id, order_id } => {
                (EventKind::DeadLettered, Some(*voucher_id), Some(order_id.to_string()))
            }
            E::WorkerJoined { worker } => (EventKind::WorkerJoined, None, Some(worker.clone())),
            E::WorkerLeft { worker } => (EventKind::WorkerLeft, None, Some(worker.clone())),
            E::VoucherChanged { .. } | E::Granted { .. } => return None,
        };
        Some(Self { at_ms, kind, voucher_id, detail })
    }
}

/// The operator's numbers for one voucher (`sale_stats`), as `live::figures` computes
/// them for it and for the dashboard's sampler.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SaleFigures {
    pub voucher_id: i64,
    /// Units put on sale.
    // Named `total_stock` on the wire, from before `stock` meant only this.
    #[serde(rename = "total_stock")]
    pub stock: i64,
    /// Units left, as Redis holds them; `None` when Redis does not hold the voucher.
    // Named `redis_stock` on the wire.
    #[serde(rename = "redis_stock")]
    #[schema(required = true)]
    pub left: Option<i64>,
    /// Shoppers the gate granted an order (the buyers set).
    pub granted: i64,
    /// Orders in the database, cancelled ones not counted: stock less stock left.
    pub persisted: i64,
    /// Of those, awaiting payment and paid; and orders cancelled (units given back).
    pub unpaid: i64,
    pub paid: i64,
    pub cancelled: i64,
    /// Entries in the order stream.
    pub stream_length: i64,
    /// Entries not yet delivered to any worker (counted up to 1,000 per bucket of the
    /// sale); `None` if unknown.
    #[schema(required = true)]
    pub lag: Option<i64>,
    /// Entries read by a worker but not yet acknowledged.
    pub pending: i64,
    /// Orders given up after too many deliveries.
    pub dead_letters: i64,
    /// Grabs the gate refused, all processes.
    pub refused: i64,
    /// This process holds a sold-out flag for the voucher (answers without Redis).
    pub sold_out_flag: bool,
    /// Grabs this process refused from its sold-out flag, without asking Redis.
    pub refused_locally: u64,
    /// An operator paused the sale (as the gate sees it).
    pub paused: bool,
    /// When the gate starts and ends the sale (Unix ms): an operator may have moved
    /// them, or ended it early.
    pub begins_at_ms: i64,
    pub ends_at_ms: i64,
    /// When the gate first sold the last unit (Unix ms), if it has.
    #[schema(required = true)]
    pub sold_out_at_ms: Option<i64>,
    /// A sale of several shards: units left in each bucket, as Redis holds them (-1:
    /// a bucket Redis lost); empty for a sale of one shard.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buckets_left: Vec<i64>,
}

/// One message of the feed, as the browser receives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OperatorFrame {
    /// Sent first on every (re)connection: recent snapshots (one a second) and events.
    Hello {
        history: Vec<Snapshot>,
        events: Vec<LiveEvent>,
    },
    Snapshot(Snapshot),
    Event(LiveEvent),
}

impl FromJson for StockLive {
    fn from_json(json: &impl wire::Json) -> Option<Self> {
        Some(Self {
            voucher_id: json.int_at("voucher_id")?,
            stock: json.int_at("total")?,
            left: json.int_at("stock")?,
            sold_out: json.flag_at("sold_out")?,
            paused: json.or_default("paused", wire::Json::flag)?,
            begins_at_ms: json.or_default("begins_at_ms", wire::Json::int)?,
            ends_at_ms: json.or_default("ends_at_ms", wire::Json::int)?,
        })
    }
}

impl FromJson for LiveEvent {
    fn from_json(json: &impl wire::Json) -> Option<Self> {
        let kind = match json.text_at("kind")?.as_str() {
            "sold_out" => EventKind::SoldOut,
            "restocked" => EventKind::Restocked,
            "dead_lettered" => EventKind::DeadLettered,
            "worker_joined" => EventKind::WorkerJoined,
            "worker_left" => EventKind::WorkerLeft,
            _ => return None,
        };
        Some(Self {
            at_ms: json.int_at("at_ms")?,
            kind,
            voucher_id: json.maybe("voucher_id", wire::Json::int)?,
            detail: json.maybe("detail", wire::Json::text)?,
        })
    }
}

impl FromJson for ShopFrame {
    fn from_json(json: &impl wire::Json) -> Option<Self> {
        match json.text_at("type")?.as_str() {
            "stock" => Some(Self::Stock {
                vouchers: Vec::from_json(&json.field("vouchers")?)?,
                now_ms: json.or_default("now_ms", wire::Json::int)?,
            }),
            "event" => LiveEvent::from_json(json).map(Self::Event),
            _ => None,
        }
    }
}

/// The shopper's feed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ShopFrame {
    Stock {
        vouchers: Vec<StockLive>,
        /// The gate's clock when the numbers were read (Unix ms).
        #[serde(default)]
        #[schema(required = true)]
        now_ms: i64,
    },
    Event(LiveEvent),
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;
    use crate::bus::SaleEvent;

    #[test]
    fn sale_events_become_feed_events() {
        let e = LiveEvent::from_sale(&SaleEvent::SoldOut { voucher_id: 42 }, 7).unwrap();
        assert_eq!((e.kind, e.voucher_id, e.at_ms), (EventKind::SoldOut, Some(42), 7));
        let e = LiveEvent::from_sale(&SaleEvent::DeadLettered { voucher_id: 42, order_id: 123_456 }, 7).unwrap();
        assert_eq!((e.kind, e.detail.as_deref()), (EventKind::DeadLettered, Some("123456")));
        let e = LiveEvent::from_sale(&SaleEvent::WorkerJoined { worker: "w-1".into() }, 0).unwrap();
        assert_eq!(e.detail.as_deref(), Some("w-1"));
        assert_eq!(LiveEvent::from_sale(&SaleEvent::VoucherChanged { voucher_id: 42, origin: 7 }, 0), None);
    }

    #[test]
    fn frames_are_tagged_json() {
        let event = LiveEvent::from_sale(&SaleEvent::Restocked { voucher_id: 3 }, 1).unwrap();
        let f = serde_json::to_value(OperatorFrame::Event(event)).unwrap();
        assert_eq!(f["type"], "event");
        assert_eq!(f["kind"], "restocked");
    }
}
