//! Passwords: the rules a new one must meet, and hashing with argon2id on a bounded
//! pool of its own. A hash at OWASP's parameters costs tens of milliseconds of one
//! core: run on the async runtime, a burst of sign-ins would stall every grab served
//! by the same thread. Here at most `threads` hashes run at once, on tokio's blocking
//! threads, `queue` more wait, and past that the call answers `unavailable` at once.
//! The pool is shared so that no source can take it from the rest: one network (an
//! IPv4 address, an IPv6 /48) holds at most a quarter of its places for browsers new to
//! the accounts they check and another quarter for browsers known to them, and known
//! browsers have a reserve of their own on top: a flood of guesses from a few networks
//! leaves the regulars signing in, and filling the reserve too takes accounts of one's
//! own (each signed in from its browser) on several networks. Checks at accounts
//! signed in to often lately (`attempts::OFTEN`) share half the pool between them,
//! and no reserve: signing in to one's own accounts over and over, from however many
//! networks, leaves the other half to everyone else.

use crate::error::{AppError, AppResult, ErrorCode};
use argon2::{
    password_hash::{rand_core::OsRng, ParamsString, PasswordHash, SaltString},
    Algorithm, Argon2, Params, PasswordHasher, PasswordVerifier, Version,
};
use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex},
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Shortest and longest password accepted, in characters (OWASP's ASVS: at least 8,
/// and long passphrases allowed).
pub const MIN_CHARS: usize = 8;
pub const MAX_CHARS: usize = 128;

/// The commonest passwords (of 8 characters or more), refused for new passwords: the
/// first guesses of any attack.
const COMMON: &str = include_str!("common_passwords.txt");

/// Checks a new password, sent as the request field `field`: its length, and that it
/// is not among the commonest.
pub fn check_new(field: &str, password: &str) -> AppResult<()> {
    let chars = password.chars().count();
    if !(MIN_CHARS..=MAX_CHARS).contains(&chars) {
        return Err(AppError::invalid(format!("A password has {MIN_CHARS} to {MAX_CHARS} characters.")).on(field));
    }
    let lower = password.to_lowercase();
    if COMMON.lines().any(|common| common == lower) {
        let message = "This password is among the most common ones: please choose another.";
        return Err(AppError::invalid(message).on(field));
    }
    Ok(())
}

/// The cost of new hashes (argon2id: memory in KiB, passes; one lane).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cost {
    pub memory_kib: u32,
    pub iterations: u32,
}

impl Cost {
    /// OWASP's recommendation for argon2id: 19 MiB, 2 passes, 1 lane.
    pub const OWASP: Self = Self { memory_kib: 19 * 1024, iterations: 2 };

    /// The parameters as a hash names them (`m=19456,t=2,p=1`).
    fn named(self) -> String {
        format!("m={},t={},p=1", self.memory_kib, self.iterations)
    }

    /// The cost a hash's parameters name (`m=…,t=…,p=…`), if they are argon2's.
    fn from_named(params: &str) -> Option<Self> {
        Self::from_params(&params.parse().ok()?)
    }

    /// The cost parsed parameters name.
    fn from_params(params: &ParamsString) -> Option<Self> {
        let cost = Self { memory_kib: params.get_decimal("m")?, iterations: params.get_decimal("t")? };
        (cost.memory_kib > 0 && cost.iterations > 0).then_some(cost)
    }

    /// A hash of a password nobody has, at this cost: what an unknown name is checked
    /// against.
    fn decoy(self) -> Result<String, String> {
        let argon = Argon2::new(Algorithm::Argon2id, Version::V0x13, self.params()?);
        hash_with(&argon, &format!("decoy-{}", rand::random::<u64>()))
    }

    /// At least as slow as either.
    fn slowest(self, other: Self) -> Self {
        Self { memory_kib: self.memory_kib.max(other.memory_kib), iterations: self.iterations.max(other.iterations) }
    }

    fn params(self) -> Result<Params, String> {
        Params::new(self.memory_kib, self.iterations, 1, None).map_err(|e| format!("password cost: {e}"))
    }
}

/// A place in the hashing pool, held until the hash it was taken for is done.
pub struct Admission {
    _place: OwnedSemaphorePermit,
    /// A place of the half frequent checks share, for one.
    _frequent: Option<OwnedSemaphorePermit>,
    /// The asker's network's share, when it counts against one.
    _share: Option<Share>,
}

/// Who asks for a place in the pool to check a password, from which address.
#[derive(Clone, Copy, Debug)]
pub enum Asker {
    /// A browser known to the account it checks (`attempts::Source::KnownBrowser`): the
    /// pool, then the reserve, within its network's share for known browsers.
    KnownBrowser(IpAddr),
    /// Anyone else: the pool, within its network's share.
    Address(IpAddr),
}

impl Asker {
    /// The share it counts on: its network (an IPv4 address, an IPv6 /48), and whether
    /// the browser is known to the account.
    fn share(self) -> (IpAddr, bool) {
        let (address, known) = match self {
            Self::KnownBrowser(address) => (address, true),
            Self::Address(address) => (address, false),
        };
        let caller = crate::client_ip::ClientIp(address);
        (caller.network().unwrap_or(caller.block()), known)
    }
}

/// The places each share holds (only those holding some: at most the pool's size).
#[derive(Default)]
struct Shares(Mutex<HashMap<(IpAddr, bool), usize>>);

/// One place of a share, given back on drop.
struct Share {
    shares: Arc<Shares>,
    network: (IpAddr, bool),
}

impl Shares {
    /// A place of `network`'s share, unless it holds `most` already.
    fn take(self: &Arc<Self>, network: (IpAddr, bool), most: usize) -> Option<Share> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let count = held.entry(network).or_default();
        if *count >= most {
            return None;
        }
        *count += 1;
        Some(Share { shares: self.clone(), network })
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.shares.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = held.get_mut(&self.network) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.network);
            }
        }
    }
}

/// Hashes and verifies passwords on a bounded pool.
pub struct Hasher {
    argon: Argon2<'static>,
    /// Calls admitted: running or waiting. One more answers `unavailable`.
    admitted: Arc<Semaphore>,
    /// Places on top of `admitted` for browsers known to their account (a quarter of
    /// it): guesses from everywhere at once do not keep the regulars out.
    reserve: Arc<Semaphore>,
    /// Places held per network, by password checks from unknown browsers and from
    /// known ones (apart).
    shares: Arc<Shares>,
    /// The most places one network may hold of either kind (a quarter of `admitted`).
    share: usize,
    /// Hashes running at once.
    running: Arc<Semaphore>,
    /// New accounts' hashes admitted at once: half the pool, so a burst of sign-ups
    /// never takes the places sign-ins need.
    new_accounts: Arc<Semaphore>,
    /// Checks at accounts signed in to often lately admitted at once: half the pool.
    frequent: Arc<Semaphore>,
    /// A hash of a password nobody has, verified when the name is unknown, so an
    /// unknown name costs what a wrong password does.
    decoy: String,
}

impl Hasher {
    pub fn new(cost: Cost, threads: usize, queue: usize) -> Result<Self, String> {
        let argon = Argon2::new(Algorithm::Argon2id, Version::V0x13, cost.params()?);
        let decoy = cost.decoy()?;
        let threads = threads.max(1);
        let quarter = ((threads + queue) / 4).max(1);
        Ok(Self {
            argon,
            admitted: Arc::new(Semaphore::new(threads + queue)),
            reserve: Arc::new(Semaphore::new(quarter)),
            shares: Arc::default(),
            share: quarter,
            running: Arc::new(Semaphore::new(threads)),
            new_accounts: Arc::new(Semaphore::new(((threads + queue) / 2).max(1))),
            frequent: Arc::new(Semaphore::new(((threads + queue) / 2).max(1))),
            decoy,
        })
    }

    /// Verifies unknown names' decoy at `cost` ([`decoy_cost`]: the slowest any stored
    /// hash has), not at the cost new hashes are made at.
    pub fn with_decoy_at(mut self, cost: Cost) -> Result<Self, String> {
        self.decoy = cost.decoy()?;
        Ok(self)
    }

    /// The PHC string of a new hash of `password` (salt, parameters and hash).
    pub async fn hash(&self, password: String) -> AppResult<String> {
        let argon = self.argon.clone();
        self.run(move || hash_with(&argon, &password).map_err(|e| AppError::internal("password hash", e))).await?
    }

    /// The hash of a new account's password, in the pool's share for new accounts
    /// (half of it): past that share a sign-up answers `unavailable` at once, and
    /// sign-ins keep the other half.
    pub async fn hash_new_account(&self, password: String) -> AppResult<String> {
        let Ok(share) = self.new_accounts.clone().try_acquire_owned() else {
            metrics::counter!("seckill_password_hashes_refused_total").increment(1);
            return Err(ErrorCode::Unavailable.into());
        };
        let argon = self.argon.clone();
        self.run(move || {
            let _share = share; // held by the hash, as the pool's places are (`run_admitted`)
            hash_with(&argon, &password).map_err(|e| AppError::internal("password hash", e))
        })
        .await?
    }

    /// A place in the pool to check a password for `asker`, or `unavailable` at once
    /// when the queue is full, or the asker's share is held already. A known browser
    /// may take the reserve once the pool is full. A check at an account signed in to
    /// often lately (`frequent`) takes one of the half of the pool such checks share,
    /// and never the reserve. Taken before a sign-in counts as an attempt: a busy
    /// server never uses up anyone's attempts.
    pub fn admit(&self, asker: Asker, frequent: bool) -> AppResult<Admission> {
        let admitted = self.shares.take(asker.share(), self.share).and_then(|share| {
            let frequent = match frequent {
                true => Some(self.frequent.clone().try_acquire_owned().ok()?),
                false => None,
            };
            let place = self.admitted.clone().try_acquire_owned();
            let place = match asker {
                Asker::KnownBrowser(_) if frequent.is_none() => {
                    place.or_else(|_| self.reserve.clone().try_acquire_owned())
                }
                _ => place,
            };
            Some(Admission { _place: place.ok()?, _frequent: frequent, _share: Some(share) })
        });
        admitted.ok_or_else(|| {
            metrics::counter!("seckill_password_hashes_refused_total").increment(1);
            ErrorCode::Unavailable.into()
        })
    }

    /// A place in the pool for a hash no password check asks for (a new password),
    /// or `unavailable` at once when the queue is full.
    fn admit_hash(&self) -> AppResult<Admission> {
        match self.admitted.clone().try_acquire_owned() {
            Ok(_place) => Ok(Admission { _place, _frequent: None, _share: None }),
            Err(_) => {
                metrics::counter!("seckill_password_hashes_refused_total").increment(1);
                Err(ErrorCode::Unavailable.into())
            }
        }
    }

    /// Whether `password` matches `hash` (compared in constant time), in a place
    /// [`Hasher::admit`] gave, and `held` back. With no hash (an unknown name, or an
    /// account without a password) a decoy is verified, so the answer takes as long as
    /// for a known name and is always false. `held` is held by the hash while it runs:
    /// if the caller goes away mid-hash, it is dropped when the hash is done, not before
    /// (a check's place, `attempts::Attempt`).
    pub async fn verify<H: Send + 'static>(
        &self,
        admission: Admission,
        password: String,
        hash: Option<String>,
        held: H,
    ) -> AppResult<(bool, H)> {
        let (real, hash) = match hash {
            Some(h) => (true, h),
            None => (false, self.decoy.clone()),
        };
        let (matches, held) = self
            .run_admitted(admission, move || {
                // The parameters are the hash's own: older hashes verify after a cost change.
                let matches = PasswordHash::new(&hash)
                    .is_ok_and(|h| Argon2::default().verify_password(password.as_bytes(), &h).is_ok());
                (matches, held)
            })
            .await?;
        Ok((real && matches, held))
    }

    /// The cost unknown names' decoy is verified at.
    pub fn decoy_cost(&self) -> Option<Cost> {
        Cost::from_params(&PasswordHash::new(&self.decoy).ok()?.params)
    }

    /// Runs `job` on a blocking thread once one of the pool's places is free; refuses
    /// at once when the queue is full.
    async fn run<T: Send + 'static>(&self, job: impl FnOnce() -> T + Send + 'static) -> AppResult<T> {
        let admission = self.admit_hash()?;
        self.run_admitted(admission, job).await
    }

    /// The job holds its places (`admission`, and one of the running) until it is done,
    /// not its caller: a caller that goes away mid-hash (a closed connection, a
    /// timeout) leaves the hash running on its blocking thread, and places given back
    /// then would let one address run any number of hashes at once.
    async fn run_admitted<T: Send + 'static>(
        &self,
        admission: Admission,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> AppResult<T> {
        let running = self.running.clone().acquire_owned().await.map_err(|_| AppError::from(ErrorCode::Unavailable))?;
        tokio::task::spawn_blocking(move || {
            let _places = (admission, running);
            job()
        })
        .await
        .map_err(|e| AppError::internal("password hash", e))
    }
}

fn hash_with(argon: &Argon2<'_>, password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut OsRng);
    argon.hash_password(password.as_bytes(), &salt).map(|h| h.to_string()).map_err(|e| e.to_string())
}

/// Notes `cost` among the costs stored hashes may have (this process makes its new
/// ones at it) and answers the slowest of them all: what an unknown name's decoy is
/// verified at, so it answers no faster than any account (after a change of cost,
/// older accounts keep their older cost until their password changes).
pub async fn decoy_cost(db: &crate::backend::Db, cost: Cost) -> sqlx::Result<Cost> {
    sqlx::query("INSERT INTO password_costs (params) VALUES ($1) ON CONFLICT DO NOTHING")
        .bind(cost.named())
        .execute(db)
        .await?;
    let costs: Vec<(String,)> = sqlx::query_as("SELECT params FROM password_costs").fetch_all(db).await?;
    Ok(costs.iter().filter_map(|(params,)| Cost::from_named(params)).fold(cost, Cost::slowest))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHEAP: Cost = Cost { memory_kib: 64, iterations: 1 };
    const KNOWN: Asker = Asker::KnownBrowser(IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 200)));

    #[test]
    fn new_passwords_are_long_enough_and_not_common() {
        assert!(check_new("new", "short").is_err());
        assert!(check_new("new", &"x".repeat(129)).is_err());
        assert!(check_new("new", "password").is_err());
        assert!(check_new("new", "Password1").is_err(), "common ones are refused whatever their case");
        assert!(check_new("new", "correct horse battery staple").is_ok());
        assert!(check_new("new", &"é".repeat(128)).is_ok(), "characters, not bytes");
        assert!(COMMON.lines().all(|p| p.chars().count() >= MIN_CHARS && p == p.to_lowercase()));
    }

    async fn verify(h: &Hasher, password: &str, hash: Option<&str>) -> AppResult<bool> {
        Ok(h.verify(h.admit(KNOWN, false)?, password.to_owned(), hash.map(str::to_owned), ()).await?.0)
    }

    #[tokio::test]
    async fn a_hash_verifies_its_password_only() {
        let hasher = Hasher::new(CHEAP, 1, 4).unwrap();
        let hash = hasher.hash("s3cret-enough".into()).await.unwrap();
        assert!(hash.starts_with("$argon2id$v=19$m=64,t=1,p=1$"), "{hash}");
        assert!(verify(&hasher, "s3cret-enough", Some(&hash)).await.unwrap());
        assert!(!verify(&hasher, "s3cret-enougH", Some(&hash)).await.unwrap());
        assert!(!verify(&hasher, "s3cret-enough", None).await.unwrap(), "no account, no match");
        assert!(!verify(&hasher, "s3cret-enough", Some("not a hash")).await.unwrap());
        // A hash made at another cost still verifies: its parameters travel with it.
        let other = Hasher::new(Cost { memory_kib: 128, iterations: 2 }, 1, 4).unwrap();
        assert!(verify(&other, "s3cret-enough", Some(&hash)).await.unwrap());
    }

    #[test]
    fn a_cost_reads_back_from_the_parameters_a_hash_names() {
        let cost = Cost { memory_kib: 19_456, iterations: 2 };
        assert_eq!(Cost::from_named(&cost.named()), Some(cost));
        assert_eq!(Cost::from_named("t=3,m=64,p=1"), Some(Cost { memory_kib: 64, iterations: 3 }));
        assert_eq!(Cost::from_named("m=64"), None);
        assert_eq!(Cost::from_named("m=x,t=1,p=1"), None);
    }

    #[tokio::test]
    async fn the_decoy_is_verified_at_the_cost_asked() {
        let hasher = Hasher::new(CHEAP, 1, 4).unwrap();
        assert_eq!(hasher.decoy_cost(), Some(CHEAP));
        let slow = Cost { memory_kib: 256, iterations: 3 };
        let hasher = hasher.with_decoy_at(slow).unwrap();
        assert_eq!(hasher.decoy_cost(), Some(slow));
        assert!(!verify(&hasher, "s3cret-enough", None).await.unwrap());
    }

    #[tokio::test]
    async fn past_the_queue_the_answer_is_unavailable_at_once() {
        let hasher = Arc::new(Hasher::new(CHEAP, 1, 1).unwrap());
        // Hold both places (one running, one waiting) while a third call comes.
        let _a = hasher.admitted.clone().try_acquire_many_owned(2).unwrap();
        let refused = hasher.hash("whatever-it-is".into()).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::Unavailable);
        assert_eq!(hasher.admit_hash().err().map(|e| e.code), Some(ErrorCode::Unavailable));
    }

    #[tokio::test]
    async fn a_hash_keeps_its_places_after_its_caller_went_away() {
        let hasher = Arc::new(Hasher::new(CHEAP, 1, 0).unwrap());
        let (started, has_started) = tokio::sync::oneshot::channel();
        let (finish, may_finish) = std::sync::mpsc::channel::<()>();
        let h = hasher.clone();
        let call = tokio::spawn(async move {
            h.run(move || {
                started.send(()).unwrap();
                may_finish.recv().ok();
            })
            .await
        });
        has_started.await.unwrap();
        call.abort(); // the caller goes away mid-hash; the hash runs on
        assert!(call.await.unwrap_err().is_cancelled());
        assert!(hasher.admit_hash().is_err(), "a place came back while its hash still runs");
        finish.send(()).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while hasher.admit_hash().is_err() {
            assert!(std::time::Instant::now() < deadline, "the place never came back after its hash");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// One network holds at most a quarter of the pool (an IPv6 /48 with all its /64s
    /// together, an IPv4 address on its own) for unknown browsers, and a quarter for
    /// known ones; with the pool full, browsers known to their account still get a
    /// place, from a reserve nobody else may take.
    #[test]
    fn no_network_takes_the_pool_and_known_browsers_have_a_reserve() {
        let hasher = Hasher::new(CHEAP, 1, 7).unwrap(); // 8 places: shares and reserve of 2
        let v6 = |s: &str| Asker::Address(s.parse().unwrap());
        let held: Vec<_> = ["2001:db8:1:1::1", "2001:db8:1:2::9"].map(|a| hasher.admit(v6(a), false).unwrap()).into();
        assert!(hasher.admit(v6("2001:db8:1:ffff::1"), false).is_err(), "a third place for the /48");
        let v4 = |n: u8| Asker::Address(IpAddr::from([192, 0, 2, n]));
        let more: Vec<_> = [v4(1), v4(1), v4(2), v4(2), v6("2001:db8:2::1"), v6("2001:db8:2::2")]
            .map(|a| hasher.admit(a, false).unwrap())
            .into();
        assert!(hasher.admit(v4(1), false).is_err(), "its share");
        assert!(hasher.admit(v4(3), false).is_err(), "the pool is full");
        let known = |n: u8| Asker::KnownBrowser(IpAddr::from([192, 0, 2, n]));
        let reserve: Vec<_> = [known(1), known(1)].map(|a| hasher.admit(a, false).unwrap()).into();
        assert!(hasher.admit(known(3), false).is_err(), "the reserve is full too");
        drop(reserve);
        let mine: Vec<_> = [known(3), known(3)].map(|a| hasher.admit(a, false).unwrap()).into();
        assert!(hasher.admit(known(3), false).is_err(), "a network's share of known browsers");
        drop((mine, held));
        assert!(hasher.admit(v6("2001:db8:1::7"), false).is_ok(), "its places came back");
        assert_eq!(hasher.shares.0.lock().unwrap().len(), 3, "only networks holding places are kept");
        drop(more);
        assert!(hasher.shares.0.lock().unwrap().is_empty());
    }

    /// Checks at accounts signed in to often lately hold half the pool at most,
    /// whichever networks they come from, and never the reserve: the other half stays
    /// for everyone else (before, a few networks signing in to their own accounts over
    /// and over held every place).
    #[test]
    fn frequent_checks_share_half_the_pool() {
        let hasher = Hasher::new(CHEAP, 1, 7).unwrap(); // 8 places: shares and reserve of 2
        let at = |n: u8| Asker::Address(IpAddr::from([192, 0, 2, n]));
        let known = |n: u8| Asker::KnownBrowser(IpAddr::from([192, 0, 2, n]));
        let frequent: Vec<_> = [at(1), at(1), known(2), known(2)].map(|a| hasher.admit(a, true).unwrap()).into();
        assert!(hasher.admit(at(3), true).is_err(), "a fifth frequent check, from a network holding none");
        assert!(hasher.admit(known(3), true).is_err(), "nor from a known browser");
        let others: Vec<_> = [at(3), at(3), at(4), at(4)].map(|a| hasher.admit(a, false).unwrap()).into();
        assert!(hasher.admit(at(5), false).is_err(), "the pool is full");
        assert!(hasher.admit(known(5), true).is_err(), "a frequent check never takes the reserve");
        assert!(hasher.admit(known(5), false).is_ok(), "another known browser does");
        drop(others);
        assert!(hasher.admit(at(6), true).is_err(), "frequent checks still hold their half");
        drop(frequent);
        assert!(hasher.admit(at(6), true).is_ok(), "their places came back");
    }

    #[tokio::test]
    async fn new_accounts_take_at_most_half_the_pool() {
        let hasher = Arc::new(Hasher::new(CHEAP, 1, 3).unwrap());
        // The share for new accounts (two of four places) is taken.
        let _share = hasher.new_accounts.clone().try_acquire_many_owned(2).unwrap();
        let refused = hasher.hash_new_account("whatever-it-is".into()).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::Unavailable);
        assert!(verify(&hasher, "whatever-it-is", None).await.is_ok(), "a sign-in still has its place");
    }
}
