//! The sign-up challenge: a proof of work that costs a caller CPU and the server
//! almost none (the open ALTCHA design). The server hands out a random `salt` (which
//! carries its expiry), a `challenge` (the SHA-256 of the salt followed by a secret
//! number up to `maxnumber`, in decimal) and an HMAC `signature` of the challenge; the
//! browser finds the number by trying them (half of `maxnumber` hashes on average);
//! the server checks it with one hash and one HMAC, statelessly, and takes each
//! challenge once (a Redis key until it expires). `maxnumber` rises with the recent
//! sign-up rate over every process, so a burst costs a bot more per account while
//! a shopper at rest waits well under a second.
//!
//! The types and the solver are shared (the shop's sign-up form runs [`Challenge::solve`]
//! in WASM loaded with the form); issuing and checking are the server's.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The only algorithm handed out.
#[cfg(feature = "ssr")]
pub const ALGORITHM: &str = "SHA-256";

/// The header a `challenge_required` refusal carries a fresh challenge in (JSON).
#[cfg(feature = "ssr")]
pub const HEADER: axum::http::HeaderName = axum::http::HeaderName::from_static("seckill-challenge");

/// The answer to `sign_up_challenge`: the challenge to solve, or `null` when none is
/// asked here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NextChallenge {
    #[schema(required = true)]
    pub challenge: Option<Challenge>,
}

/// A challenge, as `sign_up_challenge` answers it (ALTCHA's field names).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Challenge {
    pub algorithm: String,
    /// Hex SHA-256 of `salt` followed by the secret number.
    pub challenge: String,
    pub maxnumber: u64,
    /// Random, then `?max=<maxnumber>&expires=<Unix seconds>`: the work it was issued
    /// at, which must still be the work asked when it is spent.
    pub salt: String,
    /// Hex HMAC-SHA-256 of `challenge` under the server's key.
    pub signature: String,
}

/// A solved challenge, sent with `sign_up` as `challenge`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Solution {
    pub algorithm: String,
    pub challenge: String,
    pub number: u64,
    pub salt: String,
    pub signature: String,
}

impl Challenge {
    /// Tries every number up to `maxnumber`: the one whose digest is the challenge.
    pub fn solve(&self) -> Option<Solution> {
        let target = from_hex(&self.challenge)?;
        let number = (0..=self.maxnumber).find(|n| digest(&self.salt, *n) == target)?;
        Some(Solution {
            algorithm: self.algorithm.clone(),
            challenge: self.challenge.clone(),
            number,
            salt: self.salt.clone(),
            signature: self.signature.clone(),
        })
    }
}

/// SHA-256 of `salt` followed by `number` in decimal.
fn digest(salt: &str, number: u64) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(salt.as_bytes());
    hasher.update(number.to_string().as_bytes());
    hasher.finalize().into()
}

#[cfg(feature = "ssr")]
fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(hex: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(feature = "ssr")]
pub use server::*;

#[cfg(feature = "ssr")]
mod server {
    use super::{digest, from_hex, to_hex, Challenge, Solution, ALGORITHM, HEADER};
    use crate::{
        backend::{
            layout::{
                sign_up_challenge_used, sign_ups_from_address, sign_ups_in_minute, SIGN_UPS_FROM_ADDRESS_KEPT,
                SIGN_UPS_IN_MINUTE_KEPT, SIGN_UP_CHALLENGE_KEPT,
            },
            Backend,
        },
        client_ip::ClientIp,
        error::{AppError, ErrorCode},
    };
    use hmac::{Hmac, Mac};
    use std::{net::IpAddr, time::Duration};

    /// How long a challenge may be solved in.
    pub const LIFETIME_SECS: i64 = SIGN_UP_CHALLENGE_KEPT.as_secs() as i64;
    /// `maxnumber` at rest: about 50,000 hashes at most, a fraction of a second in a
    /// phone's browser.
    pub const RESTING_MAXNUMBER: u64 = 50_000;
    /// Sign-ups a minute, over every process, that double the work at rest, and the
    /// most it is multiplied by.
    pub const RESTING_RATE: u64 = 30;
    pub const MOST_FACTOR: u64 = 64;

    /// How sign-ups go here (`SECKILL_SIGN_UP`, `SECKILL_SIGN_UP_QUOTA`,
    /// `SECKILL_SIGN_UP_CHALLENGE`).
    pub struct SignUps {
        pub open: bool,
        /// Sign-ups per address per hour; 0: no quota.
        pub quota: u32,
        /// `None`: no challenge asked.
        pub challenges: Option<Challenges>,
    }

    impl SignUps {
        /// `key` signs challenges (`Secrets::derived_key`: shared by every process that
        /// shares the session secret).
        pub fn new(config: &crate::config::Config, key: [u8; 32]) -> Self {
            let challenges = config.sign_up_challenge.then(|| Challenges::new(key));
            Self { open: config.sign_up_open(), quota: config.sign_up_quota, challenges }
        }
    }

    /// What signs challenges: a key every process shares (derived from the session
    /// secret), so any process checks what another handed out.
    pub struct Challenges {
        key: [u8; 32],
    }

    /// What a checked solution's challenge was issued with.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Issued {
        /// Unix seconds.
        pub expires: i64,
        /// The work asked when it was handed out.
        pub maxnumber: u64,
    }

    impl Challenges {
        pub fn new(key: [u8; 32]) -> Self {
            Self { key }
        }

        /// A new challenge of `maxnumber`, valid from `now` (Unix seconds).
        pub fn issue(&self, maxnumber: u64, now: i64) -> Challenge {
            let random = to_hex(&rand::random::<[u8; 12]>());
            let salt = format!("{random}?max={maxnumber}&expires={}", now + LIFETIME_SECS);
            let number = rand::random_range(0..=maxnumber);
            let challenge = to_hex(&digest(&salt, number));
            let signature = to_hex(&self.sign(&challenge));
            Challenge { algorithm: ALGORITHM.into(), challenge, maxnumber, salt, signature }
        }

        /// Whether `solution` solves a challenge this server handed out that has not
        /// expired at `now`: its expiry (Unix seconds) and the work it was issued at
        /// (`maxnumber`, which the caller holds against the work asked now), or why not.
        pub fn check(&self, solution: &Solution, now: i64) -> Result<Issued, &'static str> {
            if solution.algorithm != ALGORITHM {
                return Err("unknown algorithm");
            }
            // Exactly as handed out: 24 hex digits, the work, then the expiry. Neither
            // is signed apart from the challenge (the salt is in it), and digits of the
            // number moved to the salt's end would leave the digest whole: they would
            // land in the expiry (the work is followed by it, so it cannot grow), and
            // an expiry later than any handed out is refused.
            let (random, rest) = solution.salt.split_once("?max=").ok_or("not a salt of ours")?;
            let (maxnumber, at) = rest.split_once("&expires=").ok_or("no expiry")?;
            if random.len() != 24 || !random.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err("not a salt of ours");
            }
            let maxnumber: u64 = maxnumber.parse().map_err(|_| "not a salt of ours")?;
            let expires: i64 = at.parse().map_err(|_| "no expiry")?;
            if expires < now {
                return Err("expired");
            }
            if expires > now + LIFETIME_SECS {
                return Err("not a salt of ours");
            }
            let signature = from_hex(&solution.signature).ok_or("not signed")?;
            let mut mac = self.mac();
            mac.update(solution.challenge.as_bytes());
            mac.verify_slice(&signature).map_err(|_| "not ours")?;
            if from_hex(&solution.challenge) != Some(digest(&solution.salt, solution.number)) {
                return Err("wrong number");
            }
            Ok(Issued { expires, maxnumber })
        }

        fn sign(&self, challenge: &str) -> [u8; 32] {
            let mut mac = self.mac();
            mac.update(challenge.as_bytes());
            mac.finalize().into_bytes().into()
        }

        fn mac(&self) -> Hmac<sha2::Sha256> {
            <Hmac<sha2::Sha256> as Mac>::new_from_slice(&self.key).expect("HMAC takes a key of any length")
        }
    }

    /// The work asked of the next sign-up: [`RESTING_MAXNUMBER`], doubled for each
    /// [`RESTING_RATE`] sign-ups in the last minute or two, up to [`MOST_FACTOR`] times.
    pub async fn maxnumber(backend: &Backend, now: i64) -> redis::RedisResult<u64> {
        let minute = now / 60;
        let mut redis = backend.redis.clone();
        let mut recent = 0u64;
        for m in [minute - 1, minute] {
            let n: Option<u64> =
                redis::cmd("GET").arg(sign_ups_in_minute(&backend.namespace, m)).query_async(&mut redis).await?;
            recent += n.unwrap_or(0);
        }
        let factor = (1u64 << (recent / RESTING_RATE).min(6)).min(MOST_FACTOR);
        Ok(RESTING_MAXNUMBER * factor)
    }

    /// Counts a sign-up for the rate [`maxnumber`] follows.
    pub async fn note_sign_up(backend: &Backend, now: i64) -> redis::RedisResult<()> {
        let key = sign_ups_in_minute(&backend.namespace, now / 60);
        redis::pipe()
            .atomic()
            .incr(&key, 1)
            .ignore()
            .expire(&key, SIGN_UPS_IN_MINUTE_KEPT.as_secs() as i64)
            .ignore()
            .query_async(&mut backend.redis.clone())
            .await
    }

    /// Takes the challenge of `solution` (until `expires`): false when it was taken
    /// before (each is solved for one sign-up).
    pub async fn take_once(backend: &Backend, solution: &Solution, expires: i64, now: i64) -> redis::RedisResult<bool> {
        let key = sign_up_challenge_used(&backend.namespace, &solution.challenge);
        let ttl = (expires - now).max(1) as u64;
        let set: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(1)
            .arg("NX")
            .arg("EX")
            .arg(ttl)
            .query_async(&mut backend.redis.clone())
            .await?;
        Ok(set.is_some())
    }

    /// Counts a sign-up from `address` (its /64 for IPv6) in this hour against
    /// `quota`, and, for IPv6, from its /48 against [`NETWORK_QUOTAS`] times it: how
    /// long to wait when over either. Without the /48's count one site's 65,536 /64s
    /// would each have the quota (accounts are what every per-account bound stands on).
    pub async fn over_quota(
        backend: &Backend,
        address: IpAddr,
        quota: u32,
        now: i64,
    ) -> redis::RedisResult<Option<Duration>> {
        if quota == 0 {
            return Ok(None);
        }
        let hour = now / 3600;
        let ip = ClientIp(address);
        let mut over = count_sign_up(backend, &ip.block().to_string(), hour).await? > quota;
        // Counted on the /48 only within the /64's own quota: one /64 past it must not
        // use up its whole site's.
        if let (false, Some(network)) = (over, ip.network()) {
            over = count_sign_up(backend, &format!("{network}/48"), hour).await? > quota.saturating_mul(NETWORK_QUOTAS);
        }
        Ok(over.then(|| Duration::from_secs(((hour + 1) * 3600 - now).max(1) as u64)))
    }

    /// An IPv6 /48's sign-ups an hour, in quotas of one address: ten /64s' worth, what a
    /// site's people sign up in an hour, and not the 65,536 /64s it holds.
    pub const NETWORK_QUOTAS: u32 = 10;

    /// Counts one sign-up from `from` (an address, a /64 or a /48) in `hour`: how many
    /// so far.
    async fn count_sign_up(backend: &Backend, from: &str, hour: i64) -> redis::RedisResult<u32> {
        let key = sign_ups_from_address(&backend.namespace, from, hour);
        let (n,): (u32,) = redis::pipe()
            .atomic()
            .incr(&key, 1)
            .expire(&key, SIGN_UPS_FROM_ADDRESS_KEPT.as_secs() as i64)
            .ignore()
            .query_async(&mut backend.redis.clone())
            .await?;
        Ok(n)
    }

    /// The refusal of a sign-up without a good solution: `challenge_required`, with a
    /// fresh challenge in the `Seckill-Challenge` header (JSON).
    pub fn required(why: &str, fresh: &Challenge) -> AppError {
        let header = serde_json::to_string(fresh).ok().and_then(|json| axum::http::HeaderValue::try_from(json).ok());
        if let (Some(response), Some(header)) = (leptos::prelude::use_context::<leptos_axum::ResponseOptions>(), header)
        {
            response.insert_header(HEADER, header);
        }
        AppError::with(ErrorCode::ChallengeRequired, format!("Solve a fresh sign-up challenge first ({why})."))
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

    #[test]
    fn a_solved_challenge_checks_once_solved_and_only_then() {
        let challenges = Challenges::new([7; 32]);
        let now = 1_800_000_000;
        // A number of two digits or more (the last check below moves one).
        let (_, solution) = loop {
            let challenge = challenges.issue(2_000, now);
            let solution = challenge.solve().expect("a number up to maxnumber solves it");
            if solution.number >= 10 {
                break (challenge, solution);
            }
        };
        assert_eq!(challenges.check(&solution, now), Ok(Issued { expires: now + LIFETIME_SECS, maxnumber: 2_000 }));
        let wrong = Solution { number: solution.number + 1, ..solution.clone() };
        assert_eq!(challenges.check(&wrong, now), Err("wrong number"));
        assert_eq!(challenges.check(&solution, now + LIFETIME_SECS + 1), Err("expired"));
        let forged = Solution { salt: format!("x{}", solution.salt), ..solution.clone() };
        assert!(challenges.check(&forged, now).is_err(), "the salt is in the challenge");
        assert_eq!(Challenges::new([8; 32]).check(&solution, now), Err("not ours"));
        // Digits of the number moved to the salt's end leave the digest whole, and
        // would push the expiry out: refused.
        let digits = solution.number.to_string();
        let (head, tail) = digits.split_at(1);
        let salt = format!("{}{head}", solution.salt);
        let moved = Solution { salt, number: tail.parse().unwrap(), ..solution.clone() };
        assert_eq!(challenges.check(&moved, now), Err("not a salt of ours"));
    }
}
