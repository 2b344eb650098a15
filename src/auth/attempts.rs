//! Guessing limits that slow the guesser and never lock the right holder out (OWASP's
//! authentication guidance: count failures per account *and* source, and make the
//! account-wide count a slowdown rather than a lockout). Every credential check (a
//! shopper's or operator's password, the admin token) is counted in Redis, shared by
//! every process (`lua/attempt.lua`), on three counters:
//! - **an address** ([`PER_ADDRESS`] failures, any account): one source's guesses;
//! - **an account from an address** ([`PER_ACCOUNT_FROM_ADDRESS`]): one source's
//!   guesses at one account;
//! - **an account** ([`PER_ACCOUNT`], every address): past it, the account slows down
//!   only the addresses that have failed at it since its slowdown began. Its right
//!   holder, from an address without such failures (a typo made before the attack
//!   began does not count), goes ahead however many guesses others make.
//!
//! Past a counter's allowance each further failure doubles the wait before the next
//! check, from [`FIRST_WAIT_MS`] up to [`LONGEST_WAIT_MS`] (429 `rate_limited` with
//! `Retry-After`). A check is **under way** from before it runs until it fails or
//! succeeds, and no more checks may be under way than the failures still allowed (one
//! at a time once they are spent), so guesses sent at once never get more checks than
//! the allowance. A success leaves the failures alone (and starts the account's count
//! from its address again); a refusal counts nothing, so an address that must wait does
//! not use up an account's allowance.
//!
//! A name nobody has makes no per-name state: it is counted in one of a fixed number of
//! shared counters ([`Target::nobody`]), held back as a real account would be, so the
//! answers never tell whether a name exists. While an address must wait, every check from
//! it waits, the right one included: answering the right credential there would tell a
//! guesser which of its guesses was right without counting it.

use super::Secrets;
use crate::{
    backend::{
        layout::{attempts_at_account, attempts_at_account_from, attempts_from_address},
        Backend,
    },
    client_ip::ClientIp,
    error::{AppError, AppResult},
};
use axum::http::HeaderMap;
use std::{net::IpAddr, time::Duration};

/// Failures from one address, at any account, before waits begin.
pub const PER_ADDRESS: u32 = 20;
/// Failures at one account from one address before waits begin.
pub const PER_ACCOUNT_FROM_ADDRESS: u32 = 5;
/// Failures at one account from every address before it slows those that failed.
pub const PER_ACCOUNT: u32 = 10;
/// The first wait past an allowance (long enough to make guessing slow, short enough
/// for an owner who mistyped); each further failure doubles it.
pub const FIRST_WAIT_MS: u64 = 30_000;
/// The longest wait between checks.
pub const LONGEST_WAIT_MS: u64 = 15 * 60 * 1000;
/// How long a count lasts after its last change.
const WINDOW_MS: u64 = 24 * 3600 * 1000;
/// How long a check may stay under way: a process that dies mid-check gives its place
/// back then.
const UNDER_WAY_MS: u64 = 60_000;

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

    /// For a name nobody has: one of [`NOBODY_BUCKETS`] counters its name falls in. A
    /// made-up name is held back as a real one would be (the answers do not tell
    /// whether it exists), and made-up names leave no state of their own.
    fn nobody(&self) -> String {
        use sha2::Digest;
        let (kind, name) = match self {
            Self::Account(name) => ("name", *name),
            Self::Operator(name) => ("op", *name),
            Self::AdminToken => return self.who(),
        };
        let digest = sha2::Sha256::digest(name.as_bytes());
        format!("{kind}-nobody:{}", u16::from_be_bytes([digest[0], digest[1]]) % NOBODY_BUCKETS)
    }
}

/// Counters names nobody has share (per address, as real accounts' are).
pub const NOBODY_BUCKETS: u16 = 4096;

/// What a script call does to its counters (`lua/attempt.lua`'s modes).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// May a check go ahead? Counts nothing.
    Peek,
    /// As `Peek`, for a credential known right at once: the account's count from this
    /// address starts again.
    Pass,
    /// May a check go ahead? If so it is under way until it fails or succeeds.
    Begin,
    /// A check begun failed.
    Fail,
    /// A check not begun (known wrong at once) fails, unless it must wait.
    FailNow,
    /// A check begun succeeded.
    Succeed,
}

impl Step {
    fn arg(self) -> &'static str {
        match self {
            Self::Peek => "peek",
            Self::Pass => "pass",
            Self::Begin => "begin",
            Self::Fail => "fail",
            Self::FailNow => "fail_now",
            Self::Succeed => "succeed",
        }
    }
}

/// The counters one check is counted on.
struct Counters {
    address: String,
    /// The account's from this address, and the account's own; none for a name
    /// nobody has.
    account: Option<(String, String)>,
}

impl Counters {
    /// The counters of a check at `who` (`None`: the address's alone).
    fn new(backend: &Backend, who: Option<String>, address: IpAddr) -> Self {
        let block = ClientIp(address).block().to_string();
        let ns = &backend.namespace;
        let account = who.map(|who| (attempts_at_account_from(ns, &who, &block), attempts_at_account(ns, &who)));
        Self { address: attempts_from_address(ns, &block), account }
    }

    /// Runs `step` on the address's counter, then the account's; a check the
    /// account's refuses is no longer under way at the address. (`Pass` is the
    /// account's own: the address's count stays.)
    async fn step(&self, backend: &Backend, step: Step) -> redis::RedisResult<Option<Duration>> {
        let at_address = if step == Step::Pass { Step::Peek } else { step };
        if let Some(wait) = run(backend, at_address, &self.address, None).await? {
            return Ok(Some(wait));
        }
        let Some((from_address, account)) = &self.account else { return Ok(None) };
        let wait = run(backend, step, from_address, Some(account)).await?;
        if wait.is_some() && step == Step::Begin {
            run(backend, Step::Succeed, &self.address, None).await?;
        }
        Ok(wait)
    }
}

/// A check under way: it holds a place until it fails or succeeds (or, if its process
/// dies, for a minute).
#[must_use = "a check under way must say how it ended"]
pub struct Attempt(Counters);

impl Attempt {
    /// The check succeeded: the account's count from this address starts again.
    pub async fn succeeded(self, backend: &Backend) -> AppResult<()> {
        self.0.step(backend, Step::Succeed).await?;
        Ok(())
    }

    /// The check failed: a failure at the address and the account.
    pub async fn failed(self, backend: &Backend) -> AppResult<()> {
        self.0.step(backend, Step::Fail).await?;
        Ok(())
    }
}

/// Begins a check of `target`'s credentials from `address` (`exists`: the name is
/// somebody's), or refuses it with `rate_limited` and how long to wait.
pub async fn begin(backend: &Backend, target: &Target<'_>, exists: bool, address: IpAddr) -> AppResult<Attempt> {
    let who = if exists { target.who() } else { target.nobody() };
    let counters = Counters::new(backend, Some(who), address);
    match counters.step(backend, Step::Begin).await? {
        Some(wait) => Err(refused(wait)),
        None => Ok(Attempt(counters)),
    }
}

/// Refuses with `rate_limited` while `address` must wait (counting nothing).
pub async fn address_may_try(backend: &Backend, address: IpAddr) -> AppResult<()> {
    match Counters::new(backend, None, address).step(backend, Step::Peek).await? {
        Some(wait) => Err(refused(wait)),
        None => Ok(()),
    }
}

/// A check whose outcome is known at once (the admin token, compared in constant
/// time): refused while `address` must wait, whatever the outcome, else a failure is
/// counted when `right` is false.
pub async fn instant(backend: &Backend, target: &Target<'_>, address: IpAddr, right: bool) -> AppResult<()> {
    match instant_wait(backend, target, address, right).await? {
        Some(wait) => Err(AppError::rate_limited(wait)),
        None => Ok(()),
    }
}

/// As [`instant`]: how long to wait, if at all.
async fn instant_wait(
    backend: &Backend,
    target: &Target<'_>,
    address: IpAddr,
    right: bool,
) -> redis::RedisResult<Option<Duration>> {
    let step = if right { Step::Pass } else { Step::FailNow };
    let wait = Counters::new(backend, Some(target.who()), address).step(backend, step).await?;
    if wait.is_some() {
        metrics::counter!("seckill_credential_checks_refused_total").increment(1);
    }
    Ok(wait)
}

fn refused(wait: Duration) -> AppError {
    metrics::counter!("seckill_credential_checks_refused_total").increment(1);
    AppError::rate_limited(wait)
}

/// Runs `lua/attempt.lua`: how long to wait, if at all.
async fn run(backend: &Backend, step: Step, key: &str, account: Option<&str>) -> redis::RedisResult<Option<Duration>> {
    let free = if account.is_some() { PER_ACCOUNT_FROM_ADDRESS } else { PER_ADDRESS };
    let mut call = backend.scripts.attempt.key(key);
    if let Some(account) = account {
        call.key(account);
    }
    call.arg(step.arg()).arg(free).arg(FIRST_WAIT_MS).arg(LONGEST_WAIT_MS).arg(WINDOW_MS).arg(PER_ACCOUNT);
    call.arg(UNDER_WAY_MS);
    let wait: u64 = call.invoke_async(&mut backend.redis.clone()).await?;
    Ok((wait > 0).then(|| Duration::from_millis(wait)))
}

/// A bearer token is a claim to the admin token, on any path (`/metrics` and the live
/// feed included): checked as `admin_sign_in` checks it (refused while its address
/// must wait: `Some`, how long; a wrong one counted as a failure). With the shop's own
/// login, a token of the JWT form is a shopper's, not a claim to the admin token.
pub async fn bearer(
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
        Some(token) => instant_wait(backend, &Target::AdminToken, address, secrets.token_matches(token)).await,
        None => Ok(None),
    }
}
