//! Wakes a voucher's reader the moment this process's gate grants an order there (the
//! bus tells it: `SaleEvent::Granted`), so an idle reader need not wait out its poll
//! pause. Orders granted by other processes
//! are found by the next poll: readers never block on Redis, which lets every reader
//! share the process's one multiplexed connection (and one per node on a cluster)
//! however many vouchers are live.

use crate::bus::{SaleEvent, Subscriber};
use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};
use tokio::sync::Notify;

/// The readers of this process, by voucher and bucket.
#[derive(Default)]
pub struct Wakeups {
    readers: RwLock<HashMap<(i64, u32), Arc<Notify>>>,
}

impl Wakeups {
    /// New orders wait in the stream of `voucher_id`'s `bucket`. A no-op when no
    /// reader runs here.
    pub fn wake(&self, voucher_id: i64, bucket: u32) {
        let readers = self.readers.read().unwrap_or_else(|e| e.into_inner());
        if let Some(reader) = readers.get(&(voucher_id, bucket)) {
            // Stores a permit when the reader is busy: its next pause ends at once.
            reader.notify_one();
        }
    }

    /// The bell of the reader of `voucher_id`'s `bucket`.
    pub(super) fn register(&self, voucher_id: i64, bucket: u32) -> Arc<Notify> {
        let mut readers = self.readers.write().unwrap_or_else(|e| e.into_inner());
        readers.entry((voucher_id, bucket)).or_default().clone()
    }

    pub(super) fn unregister(&self, voucher_id: i64, bucket: u32) {
        self.readers.write().unwrap_or_else(|e| e.into_inner()).remove(&(voucher_id, bucket));
    }
}

/// The bus: this process's gate granted an order.
impl Subscriber for Wakeups {
    fn heard(&self, event: &SaleEvent, _at_ms: i64) {
        if let SaleEvent::Granted { voucher_id, bucket } = *event {
            self.wake(voucher_id, bucket);
        }
    }

    /// Nothing to catch up: a reader's next poll finds what a missed bell announced.
    fn missed(&self) {}
}
