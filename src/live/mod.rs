//! The live feed: one sampler per server process reads every live voucher's numbers a
//! few times a second and fans them out to every open dashboard over Server-Sent
//! Events (`GET /api/live`); sale events (sold out, restocked, dead-lettered, worker
//! joined or left) arrive through Redis pub/sub and are pushed the moment they happen.
//! A thousand open dashboards cost one sampler, not a thousand.

#[cfg(feature = "ssr")]
pub mod events;
#[cfg(feature = "ssr")]
pub mod hub;
#[cfg(feature = "ssr")]
pub mod sampler;
#[cfg(feature = "ssr")]
pub mod sse;
pub mod view;

use serde::{Deserialize, Serialize};

/// One voucher's numbers at one moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VoucherLive {
    pub voucher_id: i64,
    /// Units put on sale.
    pub total: i64,
    /// Units Redis still holds (-1 when Redis does not hold the voucher).
    pub stock: i64,
    /// Shoppers granted an order (the buyers set).
    pub granted: i64,
    /// Orders in the database.
    pub persisted: i64,
    /// Entries in the order stream.
    pub stream_length: i64,
    /// Entries not yet delivered to any worker (consumer-group lag; -1 if unknown).
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
    /// This process holds a sold-out flag for the voucher.
    pub sold_out: bool,
}

/// All live vouchers at one moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Unix milliseconds.
    pub at_ms: i64,
    pub vouchers: Vec<VoucherLive>,
}

/// What a shopper's page needs: stock only.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StockLive {
    pub voucher_id: i64,
    pub total: i64,
    pub stock: i64,
    pub sold_out: bool,
}

impl Snapshot {
    /// The shopper's view of this snapshot.
    pub fn stock_only(&self) -> Vec<StockLive> {
        self.vouchers
            .iter()
            .map(|v| StockLive {
                voucher_id: v.voucher_id,
                total: v.total,
                stock: v.stock,
                sold_out: v.sold_out || v.stock == 0,
            })
            .collect()
    }
}

/// Something that happened, pushed at once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveEvent {
    /// Unix milliseconds (when this process heard of it).
    pub at_ms: i64,
    pub kind: EventKind,
    pub voucher_id: Option<i64>,
    /// Order id or worker name, when the event has one.
    pub detail: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

    /// Parses a pub/sub message: `sold_out:<id>`, `restock:<id>`,
    /// `dead_letter:<id>:<order>`, `worker_joined:<name>`, `worker_left:<name>`.
    pub fn parse(message: &str, at_ms: i64) -> Option<Self> {
        let (kind, rest) = message.split_once(':')?;
        let voucher = |s: &str| s.parse::<i64>().ok();
        let (kind, voucher_id, detail) = match kind {
            "sold_out" => (EventKind::SoldOut, Some(voucher(rest)?), None),
            "restock" => (EventKind::Restocked, Some(voucher(rest)?), None),
            "dead_letter" => {
                let (v, order) = rest.split_once(':')?;
                (EventKind::DeadLettered, Some(voucher(v)?), Some(order.to_owned()))
            }
            "worker_joined" => (EventKind::WorkerJoined, None, Some(rest.to_owned())),
            "worker_left" => (EventKind::WorkerLeft, None, Some(rest.to_owned())),
            _ => return None,
        };
        Some(Self { at_ms, kind, voucher_id, detail })
    }
}

/// One message of the feed, as the browser receives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AdminFrame {
    /// Sent first on every (re)connection: recent snapshots (one a second) and events.
    Hello {
        history: Vec<Snapshot>,
        events: Vec<LiveEvent>,
    },
    Snapshot(Snapshot),
    Event(LiveEvent),
}

/// The shopper's feed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ShopFrame {
    Stock { vouchers: Vec<StockLive> },
    Event(LiveEvent),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pubsub_messages_parse_into_events() {
        let e = LiveEvent::parse("sold_out:42", 7).unwrap();
        assert_eq!((e.kind, e.voucher_id, e.at_ms), (EventKind::SoldOut, Some(42), 7));
        let e = LiveEvent::parse("dead_letter:42:123456", 7).unwrap();
        assert_eq!((e.kind, e.detail.as_deref()), (EventKind::DeadLettered, Some("123456")));
        assert_eq!(LiveEvent::parse("worker_joined:w-1", 0).unwrap().detail.as_deref(), Some("w-1"));
        assert!(LiveEvent::parse("sold_out:x", 0).is_none());
        assert!(LiveEvent::parse("nonsense", 0).is_none());
    }

    #[test]
    fn frames_are_tagged_json() {
        let f = serde_json::to_value(AdminFrame::Event(LiveEvent::parse("restock:3", 1).unwrap())).unwrap();
        assert_eq!(f["type"], "event");
        assert_eq!(f["kind"], "restocked");
    }
}
