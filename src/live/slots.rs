//! Open live feeds are counted, in total and per client address (an IPv6 /64 is one
//! address, as every other limit keys it: one host holds a whole /64): each holds a
//! socket (a file descriptor) for as long as a page is open, so a feed over either cap
//! is refused with 503 rather than letting one client, or a crowd, run the process out
//! of descriptors. The browser retries a refused feed every few seconds.

use crate::client_ip::ClientIp;
use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex},
};

/// The caps and what is open now.
pub struct FeedSlots {
    max_total: usize,
    max_per_address: usize,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
}

/// One open feed's place; gives it back when dropped (the feed ended).
pub struct FeedSlot {
    slots: Arc<FeedSlots>,
    address: IpAddr,
}

impl FeedSlots {
    pub fn new(max_total: usize, max_per_address: usize) -> Self {
        Self { max_total, max_per_address, open: Mutex::new(Open::default()) }
    }

    /// A place for a new feed from `address`, unless a cap is reached.
    pub fn take(self: &Arc<Self>, address: IpAddr) -> Option<FeedSlot> {
        let address = ClientIp(address).block();
        let mut open = self.lock();
        let mine = open.by_address.get(&address).copied().unwrap_or(0);
        if open.total >= self.max_total || mine >= self.max_per_address {
            return None;
        }
        open.total += 1;
        open.by_address.insert(address, mine + 1);
        Some(FeedSlot { slots: self.clone(), address })
    }

    /// Feeds open now.
    pub fn open(&self) -> usize {
        self.lock().total
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for FeedSlot {
    fn drop(&mut self) {
        let mut open = self.slots.lock();
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.by_address.get_mut(&self.address) {
            *n -= 1;
            if *n == 0 {
                open.by_address.remove(&self.address);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_hold_and_places_come_back() {
        let slots = Arc::new(FeedSlots::new(3, 2));
        let (a, b): (IpAddr, IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        let a1 = slots.take(a).unwrap();
        let _a2 = slots.take(a).unwrap();
        assert!(slots.take(a).is_none(), "per address");
        let _b1 = slots.take(b).unwrap();
        assert!(slots.take(b).is_none(), "in total");
        drop(a1);
        assert_eq!(slots.open(), 2);
        assert!(slots.take(b).is_some(), "a closed feed gives its place back");
    }

    #[test]
    fn an_ipv6_slash_64_is_one_address() {
        let slots = Arc::new(FeedSlots::new(10, 2));
        let host = |n: u16| IpAddr::from([0x2001, 0xdb8, 0, 7, 0, 0, 0, n]);
        let _one = slots.take(host(1)).unwrap();
        let _two = slots.take(host(2)).unwrap();
        assert!(slots.take(host(3)).is_none(), "another host of the same /64");
        assert!(slots.take(IpAddr::from([0x2001, 0xdb8, 0, 8, 0, 0, 0, 1])).is_some(), "another /64");
    }
}
