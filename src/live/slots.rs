//! Open live feeds are counted, each holding a socket (a file descriptor) for as long
//! as a page is open, so a feed over a cap is refused with 503 rather than letting one
//! client, or a crowd, run the process out of descriptors. The browser retries a
//! refused feed every few seconds. Two pools that never share a place:
//! - **shop feeds** (anonymous, one per open shop page), in total and per client
//!   address (an IPv6 /64 is one address, as every other limit keys it), and a
//!   quarter of the total at most per IPv6 /48 ([`PER_NETWORK_SHARE`]): a caller
//!   holding a /48 has 65,536 /64s, enough to take every place otherwise;
//! - **operators' boards**, a reserve of their own ([`OPERATOR_FEEDS`], at most
//!   [`FEEDS_PER_OPERATOR`] per operator): no number of shop pages, nor anyone's
//!   addresses, makes an operator's board answer 503.

use crate::client_ip::ClientIp;
use std::{
    collections::HashMap,
    hash::Hash,
    net::IpAddr,
    sync::{Arc, Mutex},
};

/// Operators' boards open at once on a process (a few dozen operators at most, each
/// with a few tabs, and wall screens).
pub const OPERATOR_FEEDS: usize = 1024;
/// Boards one operator (or the admin token, which automation and screens share) may
/// hold open at once.
pub const FEEDS_PER_OPERATOR: usize = 64;

/// The share of the shop feeds one IPv6 /48 may hold: a quarter, as of the password
/// hash pool (never less than one address's).
pub const PER_NETWORK_SHARE: usize = 4;

/// The two pools.
pub struct FeedSlots {
    shop: Arc<Pool<IpAddr>>,
    /// The shop feeds' places per IPv6 /48, taken beside each one's place in `shop`.
    networks: Arc<Pool<IpAddr>>,
    operators: Arc<Pool<String>>,
}

impl FeedSlots {
    /// Shop feeds capped at `max_total`, `max_per_address` from one address.
    pub fn new(max_total: usize, max_per_address: usize) -> Self {
        let operators = Arc::new(Pool::new(OPERATOR_FEEDS, FEEDS_PER_OPERATOR));
        let per_network = (max_total / PER_NETWORK_SHARE).max(max_per_address);
        let networks = Arc::new(Pool::new(usize::MAX, per_network));
        Self { shop: Arc::new(Pool::new(max_total, max_per_address)), networks, operators }
    }

    /// A place for a new shop feed from `address`, unless a cap is reached.
    pub fn take_shop(&self, address: IpAddr) -> Option<FeedSlot> {
        let caller = ClientIp(address);
        let held = Pool::take(&self.shop, caller.block())?;
        // Dropping `held` gives its place back when the network's is refused.
        let network = match caller.network() {
            Some(network) => Some(Pool::take(&self.networks, network)?),
            None => None,
        };
        Some(FeedSlot { _held: Box::new((held, network)) })
    }

    /// A place for a new board of the operator named `operator`, from the operators'
    /// reserve, unless a cap is reached.
    pub fn take_operator(&self, operator: &str) -> Option<FeedSlot> {
        let held = Pool::take(&self.operators, operator.to_owned())?;
        Some(FeedSlot { _held: Box::new(held) })
    }

    /// Feeds open now, both pools.
    pub fn open(&self) -> usize {
        self.shop.open() + self.operators.open()
    }
}

/// One open feed's place; gives it back when dropped (the feed ended).
pub struct FeedSlot {
    _held: Box<dyn Send + Sync>,
}

/// Places counted in total and per key.
struct Pool<K> {
    max_total: usize,
    max_per_key: usize,
    open: Mutex<Open<K>>,
}

struct Open<K> {
    total: usize,
    by_key: HashMap<K, usize>,
}

/// A place taken in a pool under a key.
struct Held<K: Hash + Eq + Clone> {
    pool: Arc<Pool<K>>,
    key: K,
}

impl<K: Hash + Eq + Clone> Pool<K> {
    fn new(max_total: usize, max_per_key: usize) -> Self {
        Self { max_total, max_per_key, open: Mutex::new(Open { total: 0, by_key: HashMap::new() }) }
    }

    fn take(pool: &Arc<Self>, key: K) -> Option<Held<K>> {
        let mut guard = pool.lock();
        let open = &mut *guard;
        let mine = open.by_key.get(&key).copied().unwrap_or(0);
        if mine >= pool.max_per_key || open.total >= pool.max_total {
            return None;
        }
        open.total += 1;
        open.by_key.insert(key.clone(), mine + 1);
        Some(Held { pool: pool.clone(), key })
    }

    fn open(&self) -> usize {
        self.lock().total
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open<K>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<K: Hash + Eq + Clone> Drop for Held<K> {
    fn drop(&mut self) {
        let mut open = self.pool.lock();
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.by_key.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.by_key.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_hold_and_places_come_back() {
        let slots = FeedSlots::new(3, 2);
        let (a, b): (IpAddr, IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        let a1 = slots.take_shop(a).unwrap();
        let _a2 = slots.take_shop(a).unwrap();
        assert!(slots.take_shop(a).is_none(), "per address");
        let _b1 = slots.take_shop(b).unwrap();
        assert!(slots.take_shop(b).is_none(), "in total");
        drop(a1);
        assert_eq!(slots.open(), 2);
        assert!(slots.take_shop(b).is_some(), "a closed feed gives its place back");
    }

    #[test]
    fn an_ipv6_slash_64_is_one_address() {
        let slots = FeedSlots::new(100, 2);
        let host = |n: u16| IpAddr::from([0x2001, 0xdb8, 0, 7, 0, 0, 0, n]);
        let _one = slots.take_shop(host(1)).unwrap();
        let _two = slots.take_shop(host(2)).unwrap();
        assert!(slots.take_shop(host(3)).is_none(), "another host of the same /64");
        assert!(slots.take_shop(IpAddr::from([0x2001, 0xdb8, 0, 8, 0, 0, 0, 1])).is_some(), "another /64");
    }

    #[test]
    fn an_ipv6_slash_48_holds_a_quarter_of_the_places_whatever_its_64s() {
        let slots = FeedSlots::new(8, 2);
        let host = |net: u16, sub: u16| IpAddr::from([0x2001, 0xdb8, net, sub, 0, 0, 0, 1]);
        let mine: Vec<_> = (0..2).map(|sub| slots.take_shop(host(1, sub)).unwrap()).collect();
        assert!(slots.take_shop(host(1, 9)).is_none(), "a third /64 of the same /48");
        assert_eq!(slots.open(), 2, "the refused one's address place given back");
        assert!(slots.take_shop(host(2, 0)).is_some(), "another /48");
        assert!(slots.take_shop([10, 0, 0, 1].into()).is_some(), "IPv4 has no /48");
        drop(mine);
        assert!(slots.take_shop(host(1, 9)).is_some());
    }

    #[test]
    fn operators_boards_have_a_reserve_of_their_own() {
        let slots = FeedSlots::new(1, 1);
        let _shop = slots.take_shop([10, 0, 0, 1].into()).unwrap();
        assert!(slots.take_shop([10, 0, 0, 2].into()).is_none(), "the shop feeds are full");
        let boards: Vec<_> = (0..FEEDS_PER_OPERATOR).map(|_| slots.take_operator("ann").unwrap()).collect();
        assert!(slots.take_operator("ann").is_none(), "one operator's tabs are capped");
        assert!(slots.take_operator("token").is_some(), "another operator's board opens");
        drop(boards);
        assert!(slots.take_operator("ann").is_some());
    }
}
