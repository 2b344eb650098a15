//! Guessing limits: every credential check (a shopper's or operator's password, the
//! admin token) is counted in Redis, shared by every process (`lua/attempt.lua`):
//! every attempt at an account, and every failure from an address. A few are free;
//! each one past them doubles the wait before the next, up to [`LONGEST_WAIT_MS`]. An
//! attempt at an account is counted before the check runs, so guesses sent at once
//! cannot slip past the count; a successful sign-in clears the account's count. An
//! address counts failures only, so an office behind one address can sign many
//! people in at once.
//!
//! So nobody gets more than [`PER_ACCOUNT`] quick guesses at one account, however many
//! addresses they use, and the owner is told how long to wait (429 with
//! `Retry-After`). The same makes an account easy to lock for a while by guessing at it:
//! the waits stay short (at most [`LONGEST_WAIT_MS`]).

use super::Secrets;
use crate::{
    backend::{layout::attempts_counter, Backend},
    error::{AppError, AppResult},
    state::ClientIp,
};
use axum::http::HeaderMap;
use std::{net::IpAddr, time::Duration};

/// Free attempts at one account, and failures from one address, before waits begin.
pub const PER_ACCOUNT: u32 = 5;
pub const PER_ADDRESS: u32 = 20;
/// The first wait past the free attempts (long enough to make guessing slow, short
/// enough for an owner who mistyped); each further attempt doubles it.
const FIRST_WAIT_MS: u64 = 30_000;
/// The longest wait between attempts.
pub const LONGEST_WAIT_MS: u64 = 15 * 60 * 1000;
/// How long a count lasts after its last attempt.
const WINDOW_MS: u64 = 24 * 3600 * 1000;

/// Whose credentials are checked.
pub enum Target<'a> {
    /// A shopper account, by the name given.
    Account(&'a str),
    /// An operator account, by the name given.
    Operator(&'a str),
    /// The admin token.
    AdminToken,
}

impl Target<'_> {
    fn who(&self) -> String {
        match self {
            Self::Account(name) => format!("name:{name}"),
            Self::Operator(name) => format!("op:{name}"),
            Self::AdminToken => "token".to_owned(),
        }
    }
}

/// Counts one check of `target`'s credentials from `address`, or refuses it with
/// `rate_limited` and how long to wait (also in `Retry-After`).
pub async fn begin(backend: &Backend, target: &Target<'_>, address: IpAddr) -> AppResult<()> {
    match wait(backend, target, address).await? {
        Some(wait) => Err(AppError::rate_limited(wait)),
        None => Ok(()),
    }
}

/// Counts one check at the account, or says how long the caller must wait first
/// (counting nothing). The address goes first: an address that must wait does not use
/// up the account's attempts.
async fn wait(backend: &Backend, target: &Target<'_>, address: IpAddr) -> redis::RedisResult<Option<Duration>> {
    if let Some(wait) = attempt(backend, &address_key(backend, address), PER_ADDRESS, false).await? {
        return Ok(Some(wait));
    }
    attempt(backend, &attempts_counter(&backend.namespace, &target.who()), PER_ACCOUNT, true).await
}

/// The credentials were wrong: a failure from this address.
pub async fn failed(backend: &Backend, address: IpAddr) -> AppResult<()> {
    attempt(backend, &address_key(backend, address), PER_ADDRESS, true).await?;
    Ok(())
}

/// The credentials were right: the account's count starts again.
pub async fn succeeded(backend: &Backend, target: &Target<'_>) -> AppResult<()> {
    let account_key = attempts_counter(&backend.namespace, &target.who());
    let () = redis::cmd("DEL").arg(&account_key).query_async(&mut backend.redis.clone()).await?;
    Ok(())
}

/// An address's counter: IPv6 by its /64, as the rate limits key it.
fn address_key(backend: &Backend, address: IpAddr) -> String {
    attempts_counter(&backend.namespace, &format!("addr:{}", ClientIp(address).block()))
}

/// Runs `lua/attempt.lua` on one counter: how long to wait, if at all; `count` counts
/// this attempt unless it must wait.
async fn attempt(backend: &Backend, key: &str, free: u32, count: bool) -> redis::RedisResult<Option<Duration>> {
    let wait: u64 = backend
        .scripts
        .attempt
        .key(key)
        .arg(free)
        .arg(FIRST_WAIT_MS)
        .arg(LONGEST_WAIT_MS)
        .arg(WINDOW_MS)
        .arg(if count { "1" } else { "0" })
        .invoke_async(&mut backend.redis.clone())
        .await?;
    if wait == 0 {
        return Ok(None);
    }
    metrics::counter!("seckill_credential_checks_refused_total").increment(1);
    Ok(Some(Duration::from_millis(wait)))
}

/// A bearer token that is not the admin token is a guess at it, counted as a wrong
/// `admin_sign_in` is: past the free guesses, such calls must wait (`Some`: how long)
/// instead of being checked. The right token is never held up (automation keeps
/// working while someone guesses). With the shop's own login, a token of the JWT
/// form is a shopper's, not a guess.
pub async fn bearer_wait(
    backend: &Backend,
    secrets: &Secrets,
    headers: &HeaderMap,
    address: IpAddr,
    shop_login: bool,
) -> redis::RedisResult<Option<Duration>> {
    if shop_login && super::jwt::bearer_jwt(headers).is_some() {
        return Ok(None);
    }
    match super::session::bearer(headers) {
        Some(token) if !secrets.token_matches(token) => {
            let waited = wait(backend, &Target::AdminToken, address).await?;
            if waited.is_none() {
                attempt(backend, &address_key(backend, address), PER_ADDRESS, true).await?;
            }
            Ok(waited)
        }
        _ => Ok(None),
    }
}
