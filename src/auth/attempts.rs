//! Guessing limits that slow the guesser and never lock the right holder out (OWASP's
//! authentication guidance: count failures per account *and* source, and make the
//! account-wide count a slowdown rather than a lockout). Every credential check (a
//! shopper's or operator's password, the admin token) is counted in Redis, shared by
//! every process (`lua/attempt.lua`), on four counters:
//! - **an address** ([`PER_ADDRESS`] failures, any account's password): one source's
//!   guesses (the admin token's are not counted here, see [`wrong_bearer`]);
//! - **an account from an address** ([`PER_ACCOUNT_FROM_ADDRESS`]): one source's
//!   guesses at one account;
//! - **an account from an IPv6 /48** ([`PER_ACCOUNT_FROM_NETWORK`]): the same, over the
//!   65,536 /64s a /48 holds, each of which is an address to the others;
//! - **an account** ([`PER_ACCOUNT`], every address; the admin token is one): past it, the account slows down
//!   only the addresses that have failed at it since its slowdown began. Its right
//!   holder, from an address without such failures (a typo made before the attack
//!   began does not count), goes ahead however many guesses others make.
//!
//! A count under its allowance is kept for the allowance's share of [`ATTEMPTS_KEPT`]
//! per failure, a spent one the whole of it (`lua/attempt.lua`): a guesser waiting out
//! each count gets no more than an allowance a day either way, and a failure from an
//! address never seen again (a guesser walking IPv6 /64s) is forgotten within hours,
//! not a day (`docs/operations.md`, "Bounded keys", has the figures).
//!
//! Past a counter's allowance each further failure doubles the wait before the next
//! check, from [`FIRST_WAIT_MS`] up to [`LONGEST_WAIT_MS`] (429 `rate_limited` with
//! `Retry-After`). A check is **under way** from before it runs until it ends, and no
//! more checks may be under way than the failures still allowed (one at a time once
//! they are spent), so guesses sent at once never get more checks than the allowance.
//! A check gives its place back however it ends ([`Attempt`]), and ends within
//! [`CHECK_BOUND`]. A success leaves the failures alone (and starts the account's count
//! from its address again); a refusal counts nothing, so an address that must wait does
//! not use up an account's allowance.
//!
//! Names are counted by a keyed hash ([`Target::who`]): somebody's name and a name nobody
//! has are held back alike, so no answer or wait tells whether a name exists, and a
//! made-up name makes no state of its own.
//!
//! **Known browsers** (OWASP's device cookies): a browser that signed in to an account
//! (or made it) carries a signed cookie naming it and a number of its own
//! ([`known_browser`], one per kind of account, for [`KNOWN_SECS`]). Its checks at that
//! account are counted on that cookie's counter alone ([`PER_KNOWN_BROWSER`]), never on
//! its address's or the account's: however many others fail from the same address (a
//! carrier's NAT, an office), and at the same account, the holder's right password goes
//! ahead at once, and their own typos hold back only that cookie (and its copies). A
//! browser the account once signed in on and no longer trusts (a shared computer, a
//! phone lent) cannot hold back the holder's other browsers by failing there (a review,
//! 2026-12-02: they shared one counter, and five guesses from the old one turned the
//! holder's own browsers away). A
//! browser not known to the account is counted as above: while its address must wait,
//! every password check from it waits, the right one included (a password is short
//! enough to guess, and answering the right one there would tell a guesser which guess
//! was right without counting it). The admin token is never held back: the right token
//! always goes ahead ([`admin_token`]).
//!
//! **Right passwords cost too.** A right password counts no failure, yet its check
//! holds a place in the hash pool like any other: a few networks signing in to
//! accounts of their own over and over kept every place taken, and sign-ups, new
//! passwords and every other sign-in answered `unavailable` (a review, 2026-12-02).
//! Each account's right passwords are counted for an hour ([`signed_in`]); past
//! [`OFTEN`] its checks are *frequent* ([`often`]) and share half the pool between them
//! (`password::Hasher::admit`), so that kind of load takes accounts by the thousand,
//! each made past the sign-up quota and challenge. Its holder still signs in while the
//! pool has room; nothing turns them away that does not turn everyone away.

use super::session::{expiry, unexpired, Secrets};
use crate::{
    backend::{
        layout::{
            attempts_at_account, attempts_at_account_from, attempts_from_address, attempts_from_known_browsers,
            sign_ins_at, ATTEMPTS_KEPT, SIGN_INS_KEPT,
        },
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
/// Failures at one account from one IPv6 /48 (all its /64s together) before waits
/// begin: a caller holding a /48 gets about as many guesses as one address.
pub const PER_ACCOUNT_FROM_NETWORK: u32 = 20;
/// Failures at one account from one browser known to it (its cookie and every copy of
/// it: a copied cookie guesses no more than one address) before waits begin.
pub const PER_KNOWN_BROWSER: u32 = 5;
/// Right passwords at one account in an hour ([`SIGN_INS_KEPT`]) past which its checks
/// are frequent: more than a holder signing in on each of their devices, and a few
/// typos, would ever give.
pub const OFTEN: u32 = 10;
/// How long a browser stays known to an account after it signed in there.
pub const KNOWN_SECS: i64 = 90 * 24 * 3600;
/// The first wait past an allowance (long enough to make guessing slow, short enough
/// for an owner who mistyped); each further failure doubles it.
pub const FIRST_WAIT_MS: u64 = 30_000;
/// The longest wait between checks.
pub const LONGEST_WAIT_MS: u64 = 15 * 60 * 1000;
/// How long a count whose allowance is spent lasts after its last change (one under
/// it: that allowance's share per failure).
const WINDOW_MS: u64 = ATTEMPTS_KEPT.as_millis() as u64;
/// Longest a password check may take once under way (the hash waits for the pool,
/// then runs): past it the check ends `unavailable`, so a place is never held longer.
pub const CHECK_BOUND: Duration = Duration::from_secs(5);
/// How long a place may stay taken: a check ends within [`CHECK_BOUND`] and gives its
/// place back however it ends (its caller gone, an error: [`Attempt`]'s drop), so only
/// a process that died mid-check leaves one, and it ages out this long after it was
/// taken (each place on its own: others beginning renew nothing).
const UNDER_WAY_MS: u64 = CHECK_BOUND.as_millis() as u64 + 2_000;

/// Whose password is checked (the admin token has a counter of its own,
/// [`TOKEN_COUNTER`]).
pub enum Target<'a> {
    /// A shopper account, by the name given.
    Account(&'a str),
    /// An operator account, by the name given.
    Operator(&'a str),
}

impl Target<'_> {
    /// The counter the target is counted on. Names, somebody's or nobody's alike,
    /// fall in one of [`NAME_BUCKETS`] counters by a keyed hash (`key`, from the session
    /// secret): a name nobody has is held back exactly as a real one in its counter
    /// would be, so no answer or wait tells whether a name exists, made-up names make
    /// no state of their own, and nobody outside can tell which names share a counter.
    fn who(&self, key: &[u8; 32]) -> String {
        let (kind, digest) = self.digest(key);
        format!("{kind}:{}", u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) % NAME_BUCKETS)
    }

    /// The account alone (128 bits of the keyed hash): what a known browser's cookie
    /// and counter name it by, so neither names anybody.
    fn holder(&self, key: &[u8; 32]) -> String {
        hex::encode(&self.digest(key).1[..16])
    }

    /// The kind of account and the keyed hash of its name.
    fn digest(&self, key: &[u8; 32]) -> (&'static str, [u8; 32]) {
        use hmac::{Hmac, Mac};
        let (kind, name) = match self {
            Self::Account(name) => ("name", *name),
            Self::Operator(name) => ("op", *name),
        };
        let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(key).expect("HMAC takes a key of any length");
        mac.update(kind.as_bytes());
        mac.update(b"\0");
        mac.update(name.as_bytes());
        (kind, mac.finalize().into_bytes().into())
    }

    /// The known-browser cookie's name: one per kind of account, so a browser used by a
    /// shopper and an operator stays known to both.
    fn known_cookie(&self) -> &'static str {
        match self {
            Self::Account(_) => "seckill_known",
            Self::Operator(_) => "seckill_known_operator",
        }
    }
}

/// Where a credential check comes from, as its counters see it.
pub enum Source {
    /// A caller known by its address only.
    Address(IpAddr),
    /// A browser that signed in to the account before: its cookie's holder digest and
    /// number, which name its counter.
    KnownBrowser(String),
}

impl Source {
    /// A known browser, when `headers` carry a valid, unexpired cookie of `target`'s
    /// ([`known_browser`]); the caller's address otherwise.
    pub fn of(secrets: &Secrets, headers: &HeaderMap, target: &Target<'_>, address: IpAddr) -> Self {
        let holder = target.holder(&secrets.attempts_key);
        let known = secrets.signed_value(headers, target.known_cookie()).and_then(|value| {
            let mut parts = value.splitn(3, '.');
            let (expires, named, number) = (parts.next()?, parts.next()?, parts.next()?);
            let number = number.len() == 2 * KNOWN_NUMBER_BYTES && number.bytes().all(|b| b.is_ascii_hexdigit());
            (unexpired(expires).is_some() && named == holder && number).then(|| value[expires.len() + 1..].to_owned())
        });
        match known {
            Some(cookie) => Self::KnownBrowser(cookie),
            None => Self::Address(address),
        }
    }

    /// Who asks the hashing pool for a place for this check, from `address`.
    pub fn asker(&self, address: IpAddr) -> super::password::Asker {
        match self {
            Self::Address(address) => super::password::Asker::Address(*address),
            Self::KnownBrowser(_) => super::password::Asker::KnownBrowser(address),
        }
    }
}

/// Random bytes that tell one known-browser cookie from the account's others.
const KNOWN_NUMBER_BYTES: usize = 8;

/// A `Set-Cookie` value that makes this browser known to `target` (after a right
/// password, or the account made): signed, holding an expiry, the holder digest and a
/// random number of its own (its failures are its own).
pub fn known_browser(secrets: &Secrets, target: &Target<'_>) -> String {
    let number = hex::encode(rand::random::<[u8; KNOWN_NUMBER_BYTES]>());
    let value = format!("{}.{}.{number}", expiry(KNOWN_SECS), target.holder(&secrets.attempts_key));
    secrets.signed_cookie(target.known_cookie(), value, KNOWN_SECS)
}

/// The admin token's counter (one token: no hash to choose it by).
const TOKEN_COUNTER: &str = "token";

/// Counters names share (per address, and every address's, as one account's would be).
/// Many more than the accounts an attacker could fail at from one address in a day,
/// so a right holder almost never shares a counter with someone else's guesses.
pub const NAME_BUCKETS: u32 = 65_536;

/// What a script call does to its counters (`lua/attempt.lua`'s modes).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// May a check go ahead? Counts nothing.
    Peek,
    /// May a check go ahead? If so it is under way until it fails or succeeds.
    Begin,
    /// A check begun failed.
    Fail,
    /// A check not begun (known wrong at once) fails, unless it must wait.
    FailNow,
    /// A check begun succeeded.
    Succeed,
    /// A check begun ended without an outcome: its place comes back, nothing counted.
    End,
}

impl Step {
    fn arg(self) -> &'static str {
        match self {
            Self::Peek => "peek",
            Self::Begin => "begin",
            Self::Fail => "fail",
            Self::FailNow => "fail_now",
            Self::Succeed => "succeed",
            Self::End => "end",
        }
    }
}

/// The counters one check is counted on.
struct Counters {
    /// The first counter (the address's, or the account's known browsers') and its
    /// allowance; none for a guess at the admin token ([`Counters::token`]).
    address: Option<(String, u32)>,
    /// The account's from this address, and the account's own (none: the address's
    /// alone).
    account: Option<(String, String)>,
    /// The account's from this address's IPv6 /48 (none for IPv4).
    network: Option<String>,
    /// The check's own id: its place's name in the counters while it is under way.
    check: String,
}

impl Counters {
    /// The counters of a check at `who` (`None`: the address's alone) from `source`:
    /// from a known browser, its cookie's counter alone.
    fn new(backend: &Backend, who: Option<String>, source: &Source) -> Self {
        let ns = &backend.namespace;
        let check = hex::encode(rand::random::<[u8; 8]>());
        let address = match source {
            Source::KnownBrowser(cookie) => {
                let known = (attempts_from_known_browsers(ns, cookie), PER_KNOWN_BROWSER);
                return Self { address: Some(known), account: None, network: None, check };
            }
            Source::Address(address) => *address,
        };
        let block = ClientIp(address).block().to_string();
        let network = ClientIp(address).network().and_then(|net| Some(format!("{net}/48")).zip(who.clone()));
        let network = network.map(|(net, who)| attempts_at_account_from(ns, &who, &net));
        let account = who.map(|who| (attempts_at_account_from(ns, &who, &block), attempts_at_account(ns, &who)));
        Self { address: Some((attempts_from_address(ns, &block), PER_ADDRESS)), account, network, check }
    }

    /// The counters of a guess at the admin token from `address`: the token's own (from
    /// the IPv4 address or IPv6 /48, from everywhere), never the address's. Junk
    /// bearers from an address (a scraper set up wrong behind the same NAT, or someone
    /// meaning harm) then hold back no password check from there; and guessing a token
    /// of at least [`crate::config::MIN_ADMIN_TOKEN`] characters is hopeless anyway.
    /// Not one per IPv6 /64, as a password's are: a bearer costs its sender no hash, so
    /// each /64 of a /48 (65,536) could leave a counter for a day at the rate requests
    /// come; one per /48 bounds them by the networks a sender holds.
    fn token(backend: &Backend, address: IpAddr) -> Self {
        let ns = &backend.namespace;
        let from = ClientIp(address).network().map_or_else(|| address.to_string(), |net| format!("{net}/48"));
        let account = (attempts_at_account_from(ns, TOKEN_COUNTER, &from), attempts_at_account(ns, TOKEN_COUNTER));
        let check = hex::encode(rand::random::<[u8; 8]>());
        Self { address: None, account: Some(account), network: None, check }
    }

    /// Runs `step` on the address's counter, then the account's; a check the
    /// account's refuses is no longer under way at the address.
    async fn step(&self, backend: &Backend, step: Step) -> redis::RedisResult<Option<Duration>> {
        let check = &self.check;
        let address = self.address.as_ref().map(|(key, free)| (key.as_str(), *free, None));
        if let Some(address) = address {
            if let Some(wait) = run(backend, step, address, check).await? {
                return Ok(Some(wait));
            }
        }
        let Some((from_address, account)) = &self.account else { return Ok(None) };
        let from_address = (from_address.as_str(), PER_ACCOUNT_FROM_ADDRESS, Some(account.as_str()));
        let mut wait = run(backend, step, from_address, check).await?;
        if let (None, Some(network)) = (wait, &self.network) {
            wait = run(backend, step, (network.as_str(), PER_ACCOUNT_FROM_NETWORK, None), check).await?;
            if wait.is_some() && step == Step::Begin {
                run(backend, Step::End, from_address, check).await?;
            }
        }
        if let (Some(address), Some(_), Step::Begin) = (address, wait, step) {
            run(backend, Step::End, address, check).await?;
        }
        Ok(wait)
    }
}

/// A check under way: it holds a place until it fails or succeeds. Dropped before
/// either (its caller went away mid-check, the request timed out, an error), it gives
/// the place back, counting nothing: at once if its hash had not begun, else once the
/// hash is done (the hash holds it, `password::Hasher::verify`), so an address never
/// has more hashes going than places. Only a process that dies mid-check leaves its
/// place, for [`UNDER_WAY_MS`].
#[must_use = "a check under way must say how it ended"]
pub struct Attempt(Option<(Counters, Backend)>);

impl Attempt {
    /// The check succeeded: the account's count from this address starts again.
    pub async fn succeeded(mut self) -> AppResult<()> {
        self.end(Step::Succeed).await
    }

    /// The check failed: a failure at the address and the account.
    pub async fn failed(mut self) -> AppResult<()> {
        self.end(Step::Fail).await
    }

    async fn end(&mut self, step: Step) -> AppResult<()> {
        let Some((counters, backend)) = self.0.take() else { return Ok(()) };
        // Taken before the call: if this call is itself dropped, the place ages out.
        counters.step(&backend, step).await?;
        Ok(())
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        let Some((counters, backend)) = self.0.take() else { return };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = counters.step(&backend, Step::End).await {
                    tracing::debug!("a credential check's place, given back: {e}");
                }
            });
        }
    }
}

/// Begins a check of `target`'s credentials from `source` (`key`: what names' counters
/// are chosen by, `Secrets::attempts_key`), or refuses it with `rate_limited` and how
/// long to wait.
pub async fn begin(backend: &Backend, key: &[u8; 32], target: &Target<'_>, source: &Source) -> AppResult<Attempt> {
    let counters = Counters::new(backend, Some(target.who(key)), source);
    match counters.step(backend, Step::Begin).await? {
        Some(wait) => Err(refused(wait)),
        None => Ok(Attempt(Some((counters, backend.clone())))),
    }
}

/// Whether `target`'s account was signed in to [`OFTEN`] times or more in its count's
/// hour (a name nobody has never was): its checks then share half the hash pool.
pub async fn often(backend: &Backend, key: &[u8; 32], target: &Target<'_>) -> redis::RedisResult<bool> {
    let counter = signed_in_key(backend, key, target);
    let count: Option<u32> = redis::cmd("GET").arg(counter).query_async(&mut backend.redis.clone()).await?;
    Ok(count.is_some_and(|n| n >= OFTEN))
}

/// Counts a right password at `target`'s account (its hour begins with the first).
pub async fn signed_in(backend: &Backend, key: &[u8; 32], target: &Target<'_>) -> redis::RedisResult<()> {
    let counter = signed_in_key(backend, key, target);
    let mut count = redis::pipe();
    count.atomic().incr(&counter, 1).ignore();
    count.cmd("PEXPIRE").arg(&counter).arg(SIGN_INS_KEPT.as_millis() as u64).arg("NX").ignore();
    count.query_async(&mut backend.redis.clone()).await
}

/// The count of right passwords at `target`'s account: by its holder digest, which
/// names nobody.
fn signed_in_key(backend: &Backend, key: &[u8; 32], target: &Target<'_>) -> String {
    sign_ins_at(&backend.namespace, &target.holder(key))
}

/// Refuses with `rate_limited` while `source` must wait (counting nothing).
pub async fn may_try(backend: &Backend, source: &Source) -> AppResult<()> {
    match Counters::new(backend, None, source).step(backend, Step::Peek).await? {
        Some(wait) => Err(refused(wait)),
        None => Ok(()),
    }
}

/// A check of the admin token (compared in constant time, its outcome known at once).
/// The right token is never held back, whoever failed from its address: it is too
/// long to guess (at least [`crate::config::MIN_ADMIN_TOKEN`] characters), so
/// answering it tells a guesser nothing it could use, and it costs no Redis call
/// (monitoring keeps working while Redis is down). A wrong one is a failure on the
/// token's counters ([`wrong_bearer`]), refused while they say wait.
pub async fn admin_token(backend: &Backend, address: IpAddr, right: bool) -> AppResult<()> {
    if right {
        return Ok(());
    }
    match wrong_bearer(backend, address).await? {
        Some(wait) => Err(AppError::rate_limited(wait)),
        None => Ok(()),
    }
}

/// A guess at the admin token (at `admin_sign_in`, or a bearer that did not verify
/// where a bearer is accepted): a failure on the token's counters from this address
/// ([`Counters::token`]), unless they say it must wait (then how long). The front door calls this only for
/// the routes that take a bearer, inside the request cap.
pub async fn wrong_bearer(backend: &Backend, address: IpAddr) -> redis::RedisResult<Option<Duration>> {
    let wait = Counters::token(backend, address).step(backend, Step::FailNow).await?;
    if wait.is_some() {
        metrics::counter!("seckill_credential_checks_refused_total").increment(1);
    }
    Ok(wait)
}

fn refused(wait: Duration) -> AppError {
    metrics::counter!("seckill_credential_checks_refused_total").increment(1);
    AppError::rate_limited(wait)
}

/// Runs `lua/attempt.lua` on one counter (`(key, its allowance, the account's own
/// counter beside it)`) for the check `check`: how long to wait, if at all.
async fn run(
    backend: &Backend,
    step: Step,
    (key, free, account): (&str, u32, Option<&str>),
    check: &str,
) -> redis::RedisResult<Option<Duration>> {
    let mut call = backend.scripts.attempt.key(key);
    if let Some(account) = account {
        call.key(account);
    }
    call.arg(step.arg()).arg(free).arg(FIRST_WAIT_MS).arg(LONGEST_WAIT_MS).arg(WINDOW_MS).arg(PER_ACCOUNT);
    call.arg(UNDER_WAY_MS).arg(check);
    let wait: u64 = call.invoke_async(&mut backend.redis.clone()).await?;
    Ok((wait > 0).then(|| Duration::from_millis(wait)))
}
