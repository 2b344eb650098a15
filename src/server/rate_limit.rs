//! Who is calling, and rate limits on the calls a script would hammer (`grab`, `grab_result`, `sign_in`),
//! per session and per client address: a caller over either answers 429
//! `rate_limited` with `Retry-After`. The limits (requests per second, twice that in
//! a burst) are far above what a shopper's clicks and result polls need.
//!
//! The client address is the socket's peer, or, when the peer is the trusted proxy
//! (`SECKILL_TRUSTED_PROXY`), the last address that proxy appended to
//! `X-Forwarded-For`: a header anyone else sends is ignored.

use crate::{
    auth::session::{is_session_cookie, sent_cookies},
    error::AppError,
    error::ErrorCode,
    state::ClientIp,
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
    net::{IpAddr, SocketAddr},
    num::NonZeroU32,
    time::Duration,
};

/// The calls limited: the sale's own routes (what a storm sends) and signing in.
fn is_limited(path: &str) -> bool {
    crate::sale::routes::is_own(path) || path == <crate::auth::api::SignIn as server_fn::ServerFn>::PATH
}

/// This process's limits and what each key has used of them.
pub struct Limits {
    per_session: Option<DefaultKeyedRateLimiter<String>>,
    per_address: Option<DefaultKeyedRateLimiter<IpAddr>>,
    trusted_proxy: Option<IpAddr>,
    clock: DefaultClock,
}

impl Limits {
    /// `0` turns a limit off (load tests from one address need that).
    pub fn new(per_session: u32, per_address: u32, trusted_proxy: Option<IpAddr>) -> Self {
        Self {
            per_session: quota(per_session).map(RateLimiter::keyed),
            per_address: quota(per_address).map(RateLimiter::keyed),
            trusted_proxy,
            clock: DefaultClock::default(),
        }
    }

    /// `Err(wait)` when this caller must wait before calling again. `session` is asked
    /// for only when a per-session limit is set.
    pub fn check(&self, session: impl FnOnce() -> Option<String>, address: IpAddr) -> Result<(), Duration> {
        let now = self.clock.now();
        if let Some(limiter) = &self.per_address {
            limiter.check_key(&address).map_err(|n| n.wait_time_from(now))?;
        }
        if let Some((limiter, session)) = self.per_session.as_ref().and_then(|l| Some((l, session()?))) {
            limiter.check_key(&session).map_err(|n| n.wait_time_from(now))?;
        }
        Ok(())
    }

    /// Forgets keys that have not called lately, so memory follows the active callers.
    pub fn forget_idle(&self) {
        if let Some(l) = &self.per_session {
            l.retain_recent();
            l.shrink_to_fit();
        }
        if let Some(l) = &self.per_address {
            l.retain_recent();
            l.shrink_to_fit();
        }
    }

    /// Who is calling: the socket's peer, or the client the trusted proxy names.
    fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if Some(peer) != self.trusted_proxy {
            return peer;
        }
        let forwarded = headers.get("x-forwarded-for").and_then(|v| v.to_str().ok());
        forwarded.and_then(|v| v.rsplit(',').next()).and_then(|a| a.trim().parse().ok()).unwrap_or(peer)
    }
}

fn quota(per_second: u32) -> Option<Quota> {
    NonZeroU32::new(per_second)
        .map(|r| Quota::per_second(r).allow_burst(r.saturating_mul(NonZeroU32::MIN.saturating_add(1))))
}

/// The session cookie's value as sent (signed or not: an unsigned one is refused later,
/// and rotating forged values only meets the per-address limit).
fn session_of(headers: &HeaderMap) -> Option<String> {
    sent_cookies(headers).find(|(name, _)| is_session_cookie(name)).map(|(_, value)| value.to_owned())
}

/// Records who is calling (for the handlers, as [`ClientIp`]), then holds back a
/// caller over its limits: `Err` is how long it must wait (see [`refusal`]).
pub fn admit(limits: &Limits, peer: SocketAddr, req: &mut Request) -> Result<(), Duration> {
    let client = limits.client(peer.ip(), req.headers());
    req.extensions_mut().insert(ClientIp(client));
    if !is_limited(req.uri().path()) {
        return Ok(());
    }
    limits.check(|| session_of(req.headers()), client)
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

    #[test]
    fn a_burst_passes_and_a_hammer_is_stopped() {
        let limits = Limits::new(2, 0, None);
        let me: IpAddr = [127, 0, 0, 1].into();
        for _ in 0..4 {
            assert_eq!(limits.check(|| Some("s1".into()), me), Ok(()), "a burst of twice the rate passes");
        }
        let wait = limits.check(|| Some("s1".into()), me).unwrap_err();
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(1));
        assert_eq!(limits.check(|| Some("s2".into()), me), Ok(()), "another session has its own allowance");
        assert_eq!(limits.check(|| None, me), Ok(()), "no session, no per-session limit");
        let off = Limits::new(0, 0, None);
        assert!((0..10_000).all(|_| off.check(|| Some("s".into()), me).is_ok()), "0 turns limits off");
    }

    #[test]
    fn only_the_trusted_proxy_names_the_client() {
        let proxy: IpAddr = [10, 0, 0, 1].into();
        let limits = Limits::new(0, 1, Some(proxy));
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", HeaderValue::from_static("1.2.3.4, 5.6.7.8"));
        assert_eq!(limits.client(proxy, &headers), "5.6.7.8".parse::<IpAddr>().unwrap());
        let stranger: IpAddr = [9, 9, 9, 9].into();
        assert_eq!(limits.client(stranger, &headers), stranger, "a header from anyone else is ignored");
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, HeaderValue::from_static("a=1; __Host-seckill_session=abc; b=2"));
        assert_eq!(session_of(&headers).as_deref(), Some("abc"));
    }
}
