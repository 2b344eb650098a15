//! Fans the sampler's snapshots and the sale events out to every open feed.
//! Frames are serialised once, whatever the number of subscribers.

use super::{LiveEvent, OperatorFrame, ShopFrame, Snapshot};
use crate::bus::{SaleEvent, Subscriber};
use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
};
use tokio::sync::broadcast;

/// Snapshots kept for charts of a newly opened dashboard: one a second, 3 minutes.
const HISTORY: usize = 180;
/// Events kept for the log of a newly opened dashboard.
const RECENT_EVENTS: usize = 50;

/// One message, ready to send: the operators' form and, if shoppers see it, theirs.
#[derive(Clone, Debug)]
pub struct Frame {
    pub operator: Arc<str>,
    pub shop: Option<Arc<str>>,
}

#[derive(Default)]
struct Recent {
    history: VecDeque<Snapshot>,
    events: VecDeque<LiveEvent>,
    latest_shop: Option<Arc<str>>,
    /// The latest snapshot, whose sales' figures `/metrics` shows.
    latest: Option<Arc<Snapshot>>,
}

pub struct Hub {
    tx: broadcast::Sender<Frame>,
    recent: Mutex<Recent>,
}

impl Default for Hub {
    fn default() -> Self {
        // A slow browser that falls this far behind skips frames rather than
        // holding memory for it.
        let (tx, _) = broadcast::channel(64);
        Self { tx, recent: Mutex::new(Recent::default()) }
    }
}

impl Hub {
    pub fn publish_snapshot(&self, snapshot: Snapshot) {
        let shop =
            Arc::<str>::from(to_json(&ShopFrame::Stock { vouchers: snapshot.stock_only(), now_ms: snapshot.at_ms }));
        let operator = Arc::<str>::from(to_json(&OperatorFrame::Snapshot(snapshot.clone())));
        let latest = Arc::new(snapshot);
        {
            let mut recent = self.lock();
            let due = recent.history.back().is_none_or(|last| latest.at_ms - last.at_ms >= 1_000);
            if due {
                if recent.history.len() == HISTORY {
                    recent.history.pop_front();
                }
                // A copy a second for the charts; every sample stands as the latest.
                recent.history.push_back(Snapshot::clone(&latest));
            }
            recent.latest = Some(latest);
            recent.latest_shop = Some(shop.clone());
        }
        let _ = self.tx.send(Frame { operator, shop: Some(shop) });
    }

    pub fn publish_event(&self, event: LiveEvent) {
        let for_shoppers = matches!(event.kind, super::EventKind::SoldOut | super::EventKind::Restocked);
        {
            let mut recent = self.lock();
            if for_shoppers && said_just_now(&recent.events, &event) {
                return;
            }
            if recent.events.len() == RECENT_EVENTS {
                recent.events.pop_front();
            }
            recent.events.push_back(event.clone());
        }
        let operator = Arc::<str>::from(to_json(&OperatorFrame::Event(event.clone())));
        let shop = for_shoppers.then(|| Arc::<str>::from(to_json(&ShopFrame::Event(event))));
        let _ = self.tx.send(Frame { operator, shop });
    }

    /// A new operator feed: its first message (history and recent events) and the rest.
    pub fn subscribe_operator(&self) -> (String, broadcast::Receiver<Frame>) {
        let rx = self.tx.subscribe();
        let recent = self.lock();
        let hello = OperatorFrame::Hello {
            history: recent.history.iter().cloned().collect(),
            events: recent.events.iter().cloned().collect(),
        };
        (to_json(&hello), rx)
    }

    /// A new shopper feed: the latest stock (if any) and the rest.
    pub fn subscribe_shop(&self) -> (Option<Arc<str>>, broadcast::Receiver<Frame>) {
        let rx = self.tx.subscribe();
        (self.lock().latest_shop.clone(), rx)
    }

    /// The latest snapshot published, if any.
    pub fn latest(&self) -> Option<Arc<Snapshot>> {
        self.lock().latest.clone()
    }

    /// Open feeds right now.
    pub fn subscribers(&self) -> usize {
        self.tx.receiver_count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.recent.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether `event` (a sell-out or a restock) only says again what its sale's last
/// event said, within [`SAID_AGAIN_MS`]: a sale of several shards is told sold out by
/// each dry bucket that finds it so, and restocked by each bucket an addition reaches
/// (one sell-out showed three times in the log, an attack found, 2026-11-30), and the
/// copies pushed real events out of the 50 a new dashboard is shown. A feed's state is
/// its sale's last such event, so the copy is not sent either.
fn said_just_now(events: &VecDeque<LiveEvent>, event: &LiveEvent) -> bool {
    let last = events.iter().rev().find(|e| e.voucher_id == event.voucher_id);
    last.is_some_and(|e| e.kind == event.kind && event.at_ms - e.at_ms < SAID_AGAIN_MS)
}

/// How long a sale's sell-out or restock said again is taken for the same one (ms).
const SAID_AGAIN_MS: i64 = 1_000;

fn to_json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "{}".to_owned())
}
/// The bus: each event the feeds show goes to every open feed at once.
impl Subscriber for Hub {
    fn heard(&self, event: &SaleEvent, at_ms: i64) {
        if let Some(event) = LiveEvent::from_sale(event, at_ms) {
            self.publish_event(event);
        }
    }

    /// Nothing to forget: a missed event is a line missing from the log.
    fn missed(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::EventKind;

    fn event(kind: EventKind, voucher_id: i64, at_ms: i64) -> LiveEvent {
        LiveEvent { at_ms, kind, voucher_id: Some(voucher_id), detail: None }
    }

    #[test]
    fn a_sales_sell_out_or_restock_said_again_at_once_is_shown_once() {
        let hub = Hub::default();
        let mut feed = hub.tx.subscribe();
        for (kind, voucher, at) in [
            (EventKind::SoldOut, 1, 0),
            (EventKind::SoldOut, 1, 10),
            (EventKind::Restocked, 2, 20),
            (EventKind::SoldOut, 1, 30),
            (EventKind::Restocked, 1, 40),
            (EventKind::Restocked, 1, 50),
            (EventKind::SoldOut, 1, 60),
            (EventKind::SoldOut, 1, 1_060),
        ] {
            hub.publish_event(event(kind, voucher, at));
        }
        let shown: Vec<(EventKind, i64)> = hub.lock().events.iter().map(|e| (e.kind, e.at_ms)).collect();
        use EventKind::{Restocked, SoldOut};
        assert_eq!(shown, [(SoldOut, 0), (Restocked, 20), (Restocked, 40), (SoldOut, 60), (SoldOut, 1_060)]);
        let sent = std::iter::from_fn(|| feed.try_recv().ok()).count();
        assert_eq!(sent, 5, "the copies are not sent either");
    }
}
