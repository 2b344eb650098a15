//! This process's sold-out flags: a cache that lets a grab for a sold-out voucher be
//! refused without a Redis round trip.
//!
//! A flag is set by the `sold_out` broadcast (Redis pub/sub, from whichever process
//! sold the last unit) or by the gate answering `sold_out` here. Pub/sub loses
//! messages, so a flag is never the truth: it expires after `ttl`, after which the
//! next grab asks the gate again, and a `restock` broadcast clears it at once.

use crate::bus::{SaleEvent, Subscriber};
use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

/// Per voucher: until when it is flagged, and how many grabs the flag refused.
#[derive(Default)]
struct Entry {
    until: Option<Instant>,
    refused_locally: u64,
}

pub struct SoldOutFlags {
    ttl: Duration,
    entries: Mutex<HashMap<i64, Entry>>,
}

impl SoldOutFlags {
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, entries: Mutex::new(HashMap::new()) }
    }

    /// Flags the voucher sold out for the next `ttl`.
    pub fn set(&self, voucher_id: i64) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.entry(voucher_id).or_default().until = Some(Instant::now() + self.ttl);
    }

    /// Clears the flag (a unit came back).
    pub fn clear(&self, voucher_id: i64) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = entries.get_mut(&voucher_id) {
            e.until = None;
        }
    }

    /// Clears every flag (after a pub/sub reconnect, when events may have been lost).
    pub fn clear_all(&self) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.values_mut().for_each(|e| e.until = None);
    }

    /// True, and counted, when a grab can be refused here and now.
    pub fn refuse(&self, voucher_id: i64) -> bool {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entries.get_mut(&voucher_id) {
            Some(e) if e.until.is_some_and(|t| Instant::now() < t) => {
                e.refused_locally += 1;
                true
            }
            _ => false,
        }
    }

    /// Whether the voucher is flagged now (without counting a refusal).
    pub fn is_flagged(&self, voucher_id: i64) -> bool {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(&voucher_id).and_then(|e| e.until).is_some_and(|t| Instant::now() < t)
    }

    /// Grabs this process refused from its flag, without asking Redis.
    pub fn refused_locally(&self, voucher_id: i64) -> u64 {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(&voucher_id).map_or(0, |e| e.refused_locally)
    }
}

/// The broadcast: `sold_out` sets a flag, `restock` clears it, and after events may
/// have been lost no flag is trusted.
impl Subscriber for SoldOutFlags {
    fn heard(&self, event: &SaleEvent, _at_ms: i64) {
        match *event {
            SaleEvent::SoldOut { voucher_id } => self.set(voucher_id),
            SaleEvent::Restocked { voucher_id } => self.clear(voucher_id),
            _ => {}
        }
    }

    fn missed(&self) {
        self.clear_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_refuses_until_it_expires_or_is_cleared() {
        let flags = SoldOutFlags::new(Duration::from_secs(60));
        assert!(!flags.refuse(1));
        flags.set(1);
        assert!(flags.refuse(1) && flags.refuse(1));
        assert_eq!(flags.refused_locally(1), 2);
        assert!(!flags.refuse(2));
        flags.clear(1);
        assert!(!flags.refuse(1));
        assert_eq!(flags.refused_locally(1), 2);

        let short = SoldOutFlags::new(Duration::ZERO);
        short.set(3);
        assert!(!short.refuse(3), "an expired flag is asked again");
    }
}
