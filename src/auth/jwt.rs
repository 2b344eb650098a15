//! The shop's own login (optional): a deployment behind an existing shop login lets
//! shoppers call with `Authorization: Bearer <JWT>` signed by the shop's identity
//! provider, instead of a Seckill account. The token must carry the configured issuer
//! and audience, an unexpired `exp` and a `sub`, and be valid already (`nbf`, if any); it is checked against the provider's
//! public keys (a PEM file with one key, or a JWKS file), RS256, ES256 or EdDSA, the
//! algorithm given by the key, never by the token. Each `sub` is one shopper: a user
//! row made on its first call, then known to the process without a database read.

use super::store;
use crate::{
    backend::Db,
    error::{AppResult, ErrorCode},
};
use axum::http::{Extensions, HeaderMap};
use jsonwebtoken::{
    decode, decode_header,
    jwk::{AlgorithmParameters, EllipticCurve, JwkSet},
    Algorithm, DecodingKey, Validation,
};
use std::{
    collections::HashMap,
    path::Path,
    sync::{Arc, Mutex},
};

/// Clock difference tolerated between the provider and this server, in seconds.
const LEEWAY_SECS: u64 = 5;
/// Subjects whose user this process remembers; past that it starts again.
const SUBJECTS_KEPT: usize = 100_000;
/// The longest `sub` taken, in bytes (OpenID Connect: "MUST NOT exceed 255 ASCII
/// characters"): a subject is a user row and a key of the process's cache.
const MAX_SUBJECT: usize = 255;
/// The longest token whose signature is checked, in bytes: a provider's tokens are
/// a few hundred bytes to a few kilobytes.
const MAX_TOKEN: usize = 8 * 1024;

/// What the front door found of a request's bearer token of the JWT form, for the
/// per-shopper rate limit (`server::rate_limit`): the subject of one that verified,
/// or none. Set on the request, so each step that asks (the access table, the
/// idempotency keys' scope, the handler) reads it instead of checking the signature
/// again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubjectChecked(pub Option<Arc<str>>);

/// The provider's keys and what its tokens must say.
pub struct ShopLogin {
    keys: Vec<Key>,
    issuer: String,
    audience: String,
    /// `sub` → user id, as made or found once.
    users: Mutex<HashMap<String, i64>>,
}

struct Key {
    id: Option<String>,
    algorithm: Algorithm,
    key: DecodingKey,
}

#[derive(serde::Deserialize)]
struct Claims {
    sub: String,
    /// Read here as sent: the library skips a `nbf` it cannot read as a whole number
    /// (a string, a float, a negative one), where such a token must be refused.
    nbf: Option<serde_json::Value>,
}

impl Claims {
    /// The subject, if the claims hold what this module asks beyond the library's
    /// checks: a `nbf`, if any, a number of seconds already past (with the leeway),
    /// and a `sub` of 1 to [`MAX_SUBJECT`] bytes without control characters (a name
    /// shown to the shopper and to operators).
    fn subject(self) -> Option<String> {
        if let Some(nbf) = &self.nbf {
            let now = chrono::Utc::now().timestamp() as f64;
            let at = nbf.as_f64().filter(|at| at.is_finite() && *at >= 0.0)?;
            if at > now + LEEWAY_SECS as f64 {
                return None;
            }
        }
        let fits = !self.sub.is_empty() && self.sub.len() <= MAX_SUBJECT;
        (fits && !self.sub.chars().any(char::is_control)).then_some(self.sub)
    }
}

impl ShopLogin {
    /// Reads the provider's public keys from `keys` (PEM or JWKS).
    pub fn load(issuer: &str, audience: &str, keys: &Path) -> Result<Self, String> {
        let text = std::fs::read(keys).map_err(|e| format!("SECKILL_JWT_KEYS {}: {e}", keys.display()))?;
        let keys = match serde_json::from_slice::<JwkSet>(&text) {
            Ok(set) => from_jwks(&set)?,
            Err(_) => vec![from_pem(&text)?],
        };
        let (issuer, audience) = (issuer.to_owned(), audience.to_owned());
        Ok(Self { keys, issuer, audience, users: Mutex::default() })
    }

    /// The `sub` of a valid token: signed by one of the keys (of the token's algorithm
    /// and, when both name one, key id), from the issuer, for the audience, unexpired.
    pub fn subject(&self, token: &str) -> Option<String> {
        if token.len() > MAX_TOKEN {
            return None;
        }
        let header = decode_header(token).ok()?;
        let same_id = |k: &Key| k.id.is_none() || header.kid.is_none() || k.id == header.kid;
        let fits = |k: &&Key| k.algorithm == header.alg && same_id(k);
        let verified = self.keys.iter().filter(fits).find_map(|k| {
            let mut validation = Validation::new(k.algorithm);
            validation.set_issuer(&[&self.issuer]);
            validation.set_audience(&[&self.audience]);
            validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
            // A token not valid yet (`nbf` ahead, past the leeway) is refused too.
            validation.validate_nbf = true;
            validation.leeway = LEEWAY_SECS;
            decode::<Claims>(token, &k.key, &validation).ok()
        })?;
        verified.claims.subject()
    }

    /// The subject of a request's bearer token, if it is of the JWT form and valid:
    /// as the front door found it ([`SubjectChecked`]), or checked now.
    pub fn subject_of(&self, extensions: &Extensions, headers: &HeaderMap) -> Option<Arc<str>> {
        if let Some(SubjectChecked(found)) = extensions.get::<SubjectChecked>() {
            return found.clone();
        }
        self.subject(bearer_jwt(headers)?).map(Arc::from)
    }

    /// The shopper a request's bearer token names: `None` without a token of the JWT
    /// form; `not_signed_in` for one that is not valid.
    pub async fn shopper(&self, db: &Db, extensions: &Extensions, headers: &HeaderMap) -> Option<AppResult<i64>> {
        bearer_jwt(headers)?;
        let Some(subject) = self.subject_of(extensions, headers) else {
            return Some(Err(ErrorCode::NotSignedIn.into()));
        };
        Some(self.user(db, &subject).await)
    }

    /// The user of `subject`: remembered, or found or made once.
    async fn user(&self, db: &Db, subject: &str) -> AppResult<i64> {
        if let Some(&id) = self.users.lock().unwrap_or_else(|e| e.into_inner()).get(subject) {
            return Ok(id);
        }
        // The database away is `unavailable` (503: retry), as for any other call.
        let id = store::user_for_subject(db, subject).await?;
        let mut users = self.users.lock().unwrap_or_else(|e| e.into_inner());
        if users.len() >= SUBJECTS_KEPT {
            users.clear();
        }
        users.insert(subject.to_owned(), id);
        Ok(id)
    }
}

/// A bearer token of the JWT form, if the request has one.
pub fn bearer_jwt(headers: &HeaderMap) -> Option<&str> {
    super::session::bearer(headers).filter(|token| super::session::has_jwt_form(token))
}

/// A PEM file's one public key: RSA (RS256), P-256 (ES256) or Ed25519 (EdDSA).
fn from_pem(pem: &[u8]) -> Result<Key, String> {
    let (algorithm, key) = if let Ok(k) = DecodingKey::from_rsa_pem(pem) {
        (Algorithm::RS256, k)
    } else if let Ok(k) = DecodingKey::from_ec_pem(pem) {
        (Algorithm::ES256, k)
    } else if let Ok(k) = DecodingKey::from_ed_pem(pem) {
        (Algorithm::EdDSA, k)
    } else {
        return Err("SECKILL_JWT_KEYS: not a JWKS, nor a PEM public key of RSA, P-256 or Ed25519".into());
    };
    Ok(Key { id: None, algorithm, key })
}

/// A JWKS file's keys of the kinds accepted; any other kind (a shared HMAC secret, a
/// curve other than P-256) stops the start-up rather than being ignored.
fn from_jwks(set: &JwkSet) -> Result<Vec<Key>, String> {
    let keys = set.keys.iter().map(|jwk| {
        let algorithm = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Algorithm::RS256,
            AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => Algorithm::ES256,
            AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => Algorithm::EdDSA,
            _ => return Err("SECKILL_JWT_KEYS: only RSA, P-256 and Ed25519 public keys are accepted".to_owned()),
        };
        let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("SECKILL_JWT_KEYS: {e}"))?;
        Ok(Key { id: jwk.common.key_id.clone(), algorithm, key })
    });
    let keys = keys.collect::<Result<Vec<_>, String>>()?;
    if keys.is_empty() {
        return Err("SECKILL_JWT_KEYS: the key set is empty".into());
    }
    Ok(keys)
}
