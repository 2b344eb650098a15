//! Who is calling, and rate limits on every API call, per signed-in shopper and per
//! client address: a caller over either answers 429 `rate_limited` with `Retry-After`.
//! The limits (requests per second, twice that in a burst) are far above what a
//! shopper's clicks, result polls and page loads need.
//!
//! Keys are values nobody can choose: the shopper is the user id of a session cookie
//! whose signature holds and that was not ended (decoy cookies beside it are ignored),
//! or, with the shop's own login, the subject of a shop token that verifies (by a
//! hash keyed for this process, so memory stays bounded whatever the subjects);
//! the address is the socket's peer or, when the peer is the trusted proxy
//! (`SECKILL_TRUSTED_PROXY`), the last address that proxy appended to
//! `X-Forwarded-For` (every line of the header, in order; ports dropped; IPv4 written
//! as IPv6 read as IPv4). An IPv6 caller is keyed by its /64, the block one
//! subscriber gets. Memory is bounded whatever callers send: past [`MAX_KEYS`] keys in
//! a limiter, new callers share one overflow counter until idle keys are forgotten.

use crate::{
    auth::{
        caller::SessionChecked,
        jwt::{self, ShopLogin, SubjectChecked},
        Secrets,
    },
    client_ip::ClientIp,
    error::{AppError, ErrorCode},
};
use axum::{
    extract::Request,
    http::{header, HeaderMap, HeaderValue},
    response::{IntoResponse, Response},
};
use governor::{
    clock::{Clock, DefaultClock},
    DefaultKeyedRateLimiter, Quota, RateLimiter,
};
use std::{
    hash::{BuildHasher, Hash, RandomState},
    net::{IpAddr, Ipv6Addr, SocketAddr},
    num::NonZeroU32,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

/// Most keys one limiter holds (about 100 bytes each).
pub const MAX_KEYS: usize = 100_000;
/// Least time between two clean-ups forced by a full limiter.
const CLEAN_UP_EVERY: Duration = Duration::from_secs(1);

/// The calls limited: every API call (the shop page and static files are not).
fn is_limited(path: &str) -> bool {
    path.starts_with("/api/")
}

/// This process's limits and what each key has used of them.
pub struct Limits {
    per_user: Option<Keyed<Shopper>>,
    per_address: Option<Keyed<IpAddr>>,
    trusted_proxy: Option<IpAddr>,
    /// Verifies session cookies (the per-user key).
    secrets: Arc<Secrets>,
    /// Verifies shop tokens, with the shop's own login on (the per-user key too).
    shop_login: Option<Arc<ShopLogin>>,
    /// Hashes shop tokens' subjects into keys.
    subjects: RandomState,
    /// Made once: making one calibrates it.
    clock: DefaultClock,
}

/// Whom the per-shopper limit counts.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
enum Shopper {
    /// A session's user.
    User(i64),
    /// A shop token's subject, hashed ([`Limits::subjects`]).
    Subject(u64),
    /// Every new caller while the limiter is full.
    Overflow,
}

/// One keyed limiter with a bound on its keys.
struct Keyed<K: Hash + Eq + Clone> {
    limiter: DefaultKeyedRateLimiter<K>,
    /// The key every new caller shares while the limiter is full.
    overflow: K,
    max_keys: usize,
    /// When a full limiter last forgot its idle keys (ms since the limiter began), and
    /// the least time between two such clean-ups (ms).
    cleaned_at: AtomicU64,
    clean_every_ms: u64,
    started: std::time::Instant,
}

impl<K: Hash + Eq + Clone> Keyed<K> {
    fn new(per_second: u32, overflow: K, max_keys: usize, clean_every: Duration) -> Option<Self> {
        let limiter = RateLimiter::keyed(quota(per_second)?);
        let clean_every_ms = u64::try_from(clean_every.as_millis()).unwrap_or(u64::MAX);
        let started = std::time::Instant::now();
        Some(Self { limiter, overflow, max_keys, cleaned_at: AtomicU64::new(0), clean_every_ms, started })
    }

    /// `Err(wait)` when `key` must wait. A full limiter first forgets idle keys (at most
    /// once a second); still full, it counts the caller on the shared overflow counter.
    fn check(&self, key: &K, clock: &DefaultClock) -> Result<(), Duration> {
        let key = if self.limiter.len() < self.max_keys || self.clean_up() { key } else { &self.overflow };
        let now = clock.now();
        self.limiter.check_key(key).map_err(|n| n.wait_time_from(now))
    }

    /// Forgets idle keys unless done within the last second; true when there is room.
    fn clean_up(&self) -> bool {
        let now = self.started.elapsed().as_millis() as u64;
        let last = self.cleaned_at.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= self.clean_every_ms
            && self.cleaned_at.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            self.forget_idle();
        }
        self.limiter.len() < self.max_keys
    }

    fn forget_idle(&self) {
        self.limiter.retain_recent();
        self.limiter.shrink_to_fit();
    }
}

impl Limits {
    /// `0` turns a limit off (load tests from one address need that).
    pub fn new(per_session: u32, per_address: u32, trusted_proxy: Option<IpAddr>, secrets: Arc<Secrets>) -> Self {
        Self::bounded(per_session, per_address, trusted_proxy, secrets, (MAX_KEYS, CLEAN_UP_EVERY))
    }

    /// With `(max_keys, clean_every)` of the tests' choosing.
    fn bounded(
        per_session: u32,
        per_address: u32,
        trusted_proxy: Option<IpAddr>,
        secrets: Arc<Secrets>,
        (max_keys, clean_every): (usize, Duration),
    ) -> Self {
        Self {
            per_user: Keyed::new(per_session, Shopper::Overflow, max_keys, clean_every),
            per_address: Keyed::new(per_address, Ipv6Addr::UNSPECIFIED.into(), max_keys, clean_every),
            trusted_proxy: trusted_proxy.map(|p| p.to_canonical()),
            secrets,
            shop_login: None,
            subjects: RandomState::new(),
            clock: DefaultClock::default(),
        }
    }

    /// The same, the shop's tokens' subjects limited as shoppers too.
    pub fn with_shop_login(self, shop_login: Option<Arc<ShopLogin>>) -> Self {
        Self { shop_login, ..self }
    }

    /// `Err(wait)` when this caller must wait before calling again. The session is
    /// verified only when a per-user limit is set; what was found is recorded on the
    /// request ([`SessionChecked`]) for the handler.
    fn check(&self, headers: &HeaderMap, address: IpAddr) -> (Option<SessionChecked>, Result<(), Duration>) {
        if let Some(limiter) = &self.per_address {
            if let Err(wait) = limiter.check(&address_key(address), &self.clock) {
                return (None, Err(wait));
            }
        }
        let Some(limiter) = &self.per_user else { return (None, Ok(())) };
        let session = self.secrets.session_key(headers);
        let allowed = session.as_ref().map_or(Ok(()), |s| limiter.check(&Shopper::User(s.user_id), &self.clock));
        (Some(SessionChecked(session)), allowed)
    }

    /// The per-user limit for a caller without a session whose bearer token of the
    /// JWT form verifies (the shop's own login): `None` when it does not apply (no
    /// per-user limit, no shop login, a session found), else what was found of the
    /// token and whether the caller may go on.
    fn check_shop_token(&self, req: &Request) -> Option<(SubjectChecked, Result<(), Duration>)> {
        let (limiter, login) = (self.per_user.as_ref()?, self.shop_login.as_ref()?);
        if req.extensions().get::<SessionChecked>() != Some(&SessionChecked(None)) {
            return None;
        }
        let subject: Option<Arc<str>> = jwt::bearer_jwt(req.headers()).and_then(|t| login.subject(t)).map(Arc::from);
        let key = subject.as_deref().map(|sub| Shopper::Subject(self.subjects.hash_one(sub)));
        let allowed = key.map_or(Ok(()), |key| limiter.check(&key, &self.clock));
        Some((SubjectChecked(subject), allowed))
    }

    /// Forgets keys that have not called lately, so memory follows the active callers.
    pub fn forget_idle(&self) {
        if let Some(l) = &self.per_user {
            l.forget_idle();
        }
        if let Some(l) = &self.per_address {
            l.forget_idle();
        }
    }

    /// Who is calling: the socket's peer, or the client the trusted proxy names.
    fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if Some(peer) != self.trusted_proxy {
            return peer;
        }
        last_forwarded(headers).unwrap_or(peer)
    }
}

/// The last address in `X-Forwarded-For` (all its lines, in order): the one the
/// trusted proxy appended. `None` when it is missing or not an address.
fn last_forwarded(headers: &HeaderMap) -> Option<IpAddr> {
    let last_line = headers.get_all("x-forwarded-for").iter().next_back()?;
    let entry = last_line.to_str().ok()?.rsplit(',').next()?.trim();
    parse_address(entry).map(|a| a.to_canonical())
}

/// An address, with or without a port (`1.2.3.4`, `1.2.3.4:80`, `::1`, `[::1]:80`).
fn parse_address(entry: &str) -> Option<IpAddr> {
    entry.parse().ok().or_else(|| entry.parse::<SocketAddr>().ok().map(|s| s.ip()))
}

/// The key of an address: IPv4 as it is, IPv6 by its /64.
fn address_key(address: IpAddr) -> IpAddr {
    ClientIp(address).block()
}

fn quota(per_second: u32) -> Option<Quota> {
    NonZeroU32::new(per_second)
        .map(|r| Quota::per_second(r).allow_burst(r.saturating_mul(NonZeroU32::MIN.saturating_add(1))))
}

/// Records who is calling (for the handlers, as [`ClientIp`]), then holds back a
/// caller over its limits: `Err` is how long it must wait (see [`refusal`]).
pub fn admit(limits: &Limits, peer: SocketAddr, req: &mut Request) -> Result<(), Duration> {
    let client = limits.client(peer.ip(), req.headers());
    req.extensions_mut().insert(ClientIp(client));
    if !is_limited(req.uri().path()) {
        return Ok(());
    }
    let (checked, allowed) = limits.check(req.headers(), client);
    if let Some(checked) = checked {
        req.extensions_mut().insert(checked);
    }
    allowed
}

/// Holds back a caller of the shop's own login over the per-shopper limit (after
/// [`admit`], inside the cap on requests served at once: a request shed in a storm
/// costs no signature check), and records what was found of its token
/// ([`SubjectChecked`]) for the access table and the handler.
pub fn admit_shop_token(limits: &Limits, req: &mut Request) -> Result<(), Duration> {
    let Some((subject, allowed)) = limits.check_shop_token(req) else { return Ok(()) };
    req.extensions_mut().insert(subject);
    allowed
}

/// The 429 `rate_limited` answer, with `Retry-After` in whole seconds.
pub fn refusal(wait: Duration) -> Response {
    let mut refused = AppError::new(ErrorCode::RateLimited).into_response();
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    refused.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
    refused
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> Arc<Secrets> {
        Arc::new(Secrets::new(None, "a-test-admin-token".into(), false).unwrap())
    }

    fn with_cookie(cookie: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, HeaderValue::from_str(cookie).unwrap());
        headers
    }

    #[test]
    fn a_burst_passes_and_a_hammer_is_stopped() {
        let secrets = secrets();
        let limits = Limits::new(2, 0, None, secrets.clone());
        let me: IpAddr = [127, 0, 0, 1].into();
        let session = |user| with_cookie(secrets.session_cookie(user, "ann", 0).split(';').next().unwrap());
        for _ in 0..4 {
            assert_eq!(limits.check(&session(1), me).1, Ok(()), "a burst of twice the rate passes");
        }
        let wait = limits.check(&session(1), me).1.unwrap_err();
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(1));
        assert_eq!(limits.check(&session(2), me).1, Ok(()), "another shopper has their own allowance");
        assert_eq!(limits.check(&HeaderMap::new(), me).1, Ok(()), "no session, no per-shopper limit");
        let off = Limits::new(0, 0, None, secrets.clone());
        assert!((0..10_000).all(|_| off.check(&session(1), me).1.is_ok()), "0 turns limits off");
    }

    /// A decoy cookie beside the real one (or many, each new) gets no fresh allowance:
    /// the key is the verified shopper, whatever else the request carries. (At one call
    /// a second, a token comes back only after a second: the loop takes milliseconds.)
    #[test]
    fn decoy_cookies_do_not_reset_a_shoppers_allowance() {
        let secrets = secrets();
        let limits = Limits::new(1, 0, None, secrets.clone());
        let real = secrets.session_cookie(1, "ann", 0).split(';').next().unwrap().to_owned();
        let me: IpAddr = [127, 0, 0, 1].into();
        let refused = (0..60)
            .filter(|i| limits.check(&with_cookie(&format!("seckill_session=decoy{i}; {real}")), me).1.is_err())
            .count();
        assert!(refused >= 57, "two pass (a burst of twice one), the rest are refused: {refused} refused");
    }

    #[test]
    fn only_the_trusted_proxy_names_the_client_with_its_last_entry() {
        let proxy: IpAddr = [10, 0, 0, 1].into();
        let limits = Limits::new(0, 1, Some(proxy), secrets());
        let mut headers = HeaderMap::new();
        // A client's own line first, the proxy's appended line last.
        headers.append("x-forwarded-for", HeaderValue::from_static("6.6.6.6"));
        headers.append("x-forwarded-for", HeaderValue::from_static("1.2.3.4, 5.6.7.8:4711"));
        assert_eq!(limits.client(proxy, &headers), "5.6.7.8".parse::<IpAddr>().unwrap());
        // The proxy seen through an IPv6 listener, naming an IPv6 client with a port.
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        let mut v6 = HeaderMap::new();
        v6.insert("x-forwarded-for", HeaderValue::from_static("[2001:db8::7]:443"));
        assert_eq!(limits.client(mapped, &v6), "2001:db8::7".parse::<IpAddr>().unwrap());
        let stranger: IpAddr = [9, 9, 9, 9].into();
        assert_eq!(limits.client(stranger, &headers), stranger, "a header from anyone else is ignored");
        let mut junk = HeaderMap::new();
        junk.insert("x-forwarded-for", HeaderValue::from_static("not an address"));
        assert_eq!(limits.client(proxy, &junk), proxy);
    }

    #[test]
    fn ipv6_callers_share_their_64_and_ipv4_mapped_ones_are_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        assert_eq!(address_key(a), address_key(b));
        assert_ne!(address_key(a), address_key("2001:db8:1:3::1".parse().unwrap()));
        let limits = Limits::new(0, 1, None, secrets());
        let mapped: IpAddr = "::ffff:1.2.3.4".parse().unwrap();
        assert_eq!(limits.client(mapped, &HeaderMap::new()), "1.2.3.4".parse::<IpAddr>().unwrap());
    }

    /// A million distinct addresses (an attacker's IPv6 block, or forged entries) never
    /// hold more than the bound (and the shared overflow key); while the limiter is
    /// full, new callers share the overflow counter.
    #[test]
    fn a_million_distinct_callers_hold_bounded_memory() {
        let limits = Limits::bounded(0, 1_000, None, secrets(), (10_000, CLEAN_UP_EVERY));
        let headers = HeaderMap::new();
        let keyed = limits.per_address.as_ref().unwrap();
        let mut most = 0;
        for i in 0..1_000_000u32 {
            let _ = limits.check(&headers, IpAddr::V4(i.into())).1;
            if i % 1_000 == 0 {
                most = most.max(keyed.limiter.len());
            }
        }
        assert!(most <= 10_001, "{most} keys held");
        // Full, and its keys busy: a new caller lands on the overflow counter, which the
        // burst of new callers has spent.
        // Never cleaned up here: however slow the machine, the ten keys stay.
        let full = Limits::bounded(0, 1, None, secrets(), (10, Duration::MAX));
        for i in 0..10u32 {
            assert!(full.check(&headers, IpAddr::V4(i.into())).1.is_ok());
        }
        assert!(full.check(&headers, IpAddr::V4(100.into())).1.is_ok(), "the first newcomer uses the overflow counter");
        assert!(full.check(&headers, IpAddr::V4(101.into())).1.is_ok(), "its burst of two");
        assert!(full.check(&headers, IpAddr::V4(102.into())).1.is_err(), "then newcomers wait together");
    }
}
