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
    sync::{
        atomic::{AtomicU64, Ordering},
        Mutex,
    },
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
    /// Flags cleared so far, of any voucher, bumped under the entries' lock: a gate's
    /// `sold_out` that a clear may have overtaken sets no flag
    /// ([`SoldOutFlags::set_unless_cleared`]). Read without the lock by every grab.
    clears: AtomicU64,
}

/// What a grab read of the flags' clears before it asked the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clears(u64);

impl SoldOutFlags {
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, entries: Mutex::new(HashMap::new()), clears: AtomicU64::new(0) }
    }

    fn flags(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Flags the voucher sold out for the next `ttl` (the broadcast: it comes in order
    /// with the restocks).
    pub fn set(&self, voucher_id: i64) {
        self.flags().entry(voucher_id).or_default().until = Some(Instant::now() + self.ttl);
    }

    /// The clears so far, read before a grab asks the gate.
    pub fn clears(&self) -> Clears {
        Clears(self.clears.load(Ordering::Acquire))
    }

    /// Flags the voucher sold out as the gate answered a grab, unless a flag was
    /// cleared since the grab read `seen`: a restock heard between the gate's answer
    /// and this must not be undone by it (the flag would refuse for its `ttl` while a
    /// unit is on sale; an attack's reading, 2026-11-30). A flag standing is not made
    /// longer: a grab of a sharded sale whose bucket is dry is answered from the flag
    /// (`grab::in_bucket`), and such answers renewed it for as long as they came, so a
    /// process that missed a restock refused for good (a review, 2026-12-02). Once it
    /// lapses, the next grab asks again.
    pub fn set_unless_cleared(&self, voucher_id: i64, seen: Clears) {
        let mut flags = self.flags();
        if self.clears.load(Ordering::Acquire) == seen.0 {
            let flag = flags.entry(voucher_id).or_default();
            let now = Instant::now();
            if flag.until.is_none_or(|until| until <= now) {
                flag.until = Some(now + self.ttl);
            }
        }
    }

    /// Clears the flag (a unit came back).
    pub fn clear(&self, voucher_id: i64) {
        let mut flags = self.flags();
        self.clears.fetch_add(1, Ordering::AcqRel);
        if let Some(e) = flags.get_mut(&voucher_id) {
            e.until = None;
        }
    }

    /// Clears every flag (after a pub/sub reconnect, when events may have been lost).
    pub fn clear_all(&self) {
        let mut flags = self.flags();
        self.clears.fetch_add(1, Ordering::AcqRel);
        flags.values_mut().for_each(|e| e.until = None);
    }

    /// True, and counted, when a grab can be refused here and now.
    pub fn refuse(&self, voucher_id: i64) -> bool {
        match self.flags().get_mut(&voucher_id) {
            Some(e) if e.until.is_some_and(|t| Instant::now() < t) => {
                e.refused_locally += 1;
                true
            }
            _ => false,
        }
    }

    /// Whether the voucher is flagged now (without counting a refusal).
    pub fn is_flagged(&self, voucher_id: i64) -> bool {
        self.flags().get(&voucher_id).and_then(|e| e.until).is_some_and(|t| Instant::now() < t)
    }

    /// Grabs this process refused from its flag, without asking Redis.
    pub fn refused_locally(&self, voucher_id: i64) -> u64 {
        self.flags().get(&voucher_id).map_or(0, |e| e.refused_locally)
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

        // A gate's answer overtaken by a restock of any sale sets no flag.
        let seen = flags.clears();
        flags.clear(9);
        flags.set_unless_cleared(1, seen);
        assert!(!flags.refuse(1), "a restock came after the gate's answer");
        flags.set_unless_cleared(1, flags.clears());
        assert!(flags.refuse(1));

        let short = SoldOutFlags::new(Duration::ZERO);
        short.set(3);
        assert!(!short.refuse(3), "an expired flag is asked again");
    }
}
