//! Requests in flight per caller. One client address (an IPv6 /64, as every other limit
//! keys it) may hold at most an eighth of the requests served at once
//! (`SECKILL_MAX_REQUESTS`, [`ADDRESS_SHARE`]), and one IPv6 /48 (its 65,536 /64s) a
//! quarter ([`NETWORK_SHARE`], as live feeds and the password hash pool share theirs).
//! The rate limit alone does not bound them. A request whose body comes a byte at a
//! time holds its place for the whole request timeout (30 s). In an attack
//! (2026-11-30), one address sending 150 such requests a second held 72 % of the
//! places, and with a lower cap every other caller's call answered 503. Past its share,
//! a caller is answered 429 `rate_limited` (`Retry-After: 1`): it waits for its own
//! requests, not for anyone else's.
//!
//! An address's share grows to what it may send in a second's burst (twice
//! `SECKILL_RATE_PER_ADDRESS`), so calls that end in time never meet it, but never past
//! a quarter of the places: with a cap of 200 and the default rate, a floor of the
//! burst alone let one address hold every place (a review, 2026-11-30). The shares are
//! off with the per-address rate limit (`0`): load tests send everything from one
//! address.
//!
//! Counted without a lock, in memory nobody can grow: a fixed table of counters,
//! indexed by a keyed hash of the address. The key is this process's own, drawn at
//! random, so nobody can choose whose counter they share. Addresses that share a
//! counter share its share: an address that holds its whole share holds back about
//! one in [`COUNTERS`] others, and an address that holds nothing holds back none.

use crate::client_ip::ClientIp;
use std::{
    hash::{BuildHasher, RandomState},
    net::IpAddr,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
};

/// One address may hold this fraction of the places (1/8).
pub const ADDRESS_SHARE: usize = 8;
/// One IPv6 /48 may hold this fraction of the places (1/4).
pub const NETWORK_SHARE: usize = 4;
/// Counters in each table (addresses, networks): 64 KiB each.
pub const COUNTERS: usize = 16_384;

/// What every address and IPv6 /48 holds in flight, counted.
pub struct InFlight {
    addresses: Box<[AtomicU32]>,
    networks: Box<[AtomicU32]>,
    per_address: u32,
    per_network: u32,
    key: RandomState,
}

/// A request's place in its caller's share, given back when dropped.
pub struct Place {
    of: Arc<InFlight>,
    address: usize,
    network: Option<usize>,
}

impl InFlight {
    /// The shares of `max_requests` served at once, for addresses limited to
    /// `rate_per_address` calls a second; none when that limit is off (`0`).
    pub fn new(max_requests: usize, rate_per_address: u32) -> Option<Arc<Self>> {
        if rate_per_address == 0 {
            return None;
        }
        let burst = 2 * rate_per_address as usize;
        let part = |share: usize| (max_requests / share).max(1);
        let address = part(ADDRESS_SHARE).max(burst.min(part(NETWORK_SHARE)));
        let counted = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let (per_address, per_network) = (counted(address), counted(part(NETWORK_SHARE).max(address)));
        let table = || (0..COUNTERS).map(|_| AtomicU32::new(0)).collect();
        Some(Arc::new(Self {
            addresses: table(),
            networks: table(),
            per_address,
            per_network,
            key: RandomState::new(),
        }))
    }

    /// A place for a request from `client`, unless its address or network holds its
    /// share already.
    pub fn take(self: &Arc<Self>, client: ClientIp) -> Option<Place> {
        let address = self.counter(client.block());
        if !take_one(&self.addresses[address], self.per_address) {
            return None;
        }
        // From here the place is held: dropped, it gives back what it took.
        let mut place = Place { of: self.clone(), address, network: None };
        if let Some(network) = client.network() {
            let network = self.counter(network);
            if !take_one(&self.networks[network], self.per_network) {
                return None;
            }
            place.network = Some(network);
        }
        Some(place)
    }

    fn counter(&self, of: IpAddr) -> usize {
        (self.key.hash_one(of) % COUNTERS as u64) as usize
    }
}

/// Counts one more on `counter` unless it is at `cap`.
fn take_one(counter: &AtomicU32, cap: u32) -> bool {
    counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < cap).then_some(n + 1)).is_ok()
}

impl Drop for Place {
    fn drop(&mut self) {
        self.of.addresses[self.address].fetch_sub(1, Ordering::Relaxed);
        if let Some(network) = self.network {
            self.of.networks[network].fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(ip: &str) -> ClientIp {
        ClientIp(ip.parse().unwrap())
    }

    #[test]
    fn an_address_holds_its_share_and_no_more_and_gets_it_back() {
        let shares = InFlight::new(64, 1).unwrap();
        let held: Vec<Place> = (0..8).map(|_| shares.take(client("192.0.2.1")).expect("within the share")).collect();
        assert!(shares.take(client("192.0.2.1")).is_none(), "an eighth of 64");
        drop(held);
        assert!(shares.take(client("192.0.2.1")).is_some(), "given back");
    }

    #[test]
    fn a_48_holds_a_quarter_over_all_its_64s() {
        let shares = InFlight::new(64, 1).unwrap();
        let ip = |i: u32| client(&format!("2001:db8:1:{i:x}::1"));
        let held: Vec<Place> = (0..16).map(|i| shares.take(ip(i)).expect("within the /48's share")).collect();
        assert!(shares.take(ip(99)).is_none(), "a quarter of 64, from another /64 of the /48");
        // Another /48 has its own (one whose counter is not the first's: two in 16,384 share one).
        let first = shares.counter(client("2001:db8:1::1").network().unwrap());
        let other = (2..)
            .map(|n: u32| client(&format!("2001:db8:{n:x}::1")))
            .find(|c| shares.counter(c.network().unwrap()) != first);
        assert!(shares.take(other.unwrap()).is_some(), "another /48 has its own");
        drop(held);
        assert_eq!(shares.networks.iter().map(|c| c.load(Ordering::Relaxed)).sum::<u32>(), 0, "given back");
        assert_eq!(shares.addresses.iter().map(|c| c.load(Ordering::Relaxed)).sum::<u32>(), 0, "the refused one's too");
    }

    #[test]
    fn a_share_grows_to_a_seconds_burst_up_to_a_quarter_and_is_off_with_the_rate_limit() {
        let shares = InFlight::new(4096, 100).unwrap();
        assert_eq!((shares.per_address, shares.per_network), (512, 1024), "an eighth, a quarter");
        let shares = InFlight::new(1024, 100).unwrap();
        assert_eq!((shares.per_address, shares.per_network), (200, 256), "a second's burst");
        let shares = InFlight::new(200, 100).unwrap();
        assert_eq!((shares.per_address, shares.per_network), (50, 50), "never past a quarter");
        assert!(InFlight::new(64, 0).is_none());
    }
}
