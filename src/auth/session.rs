//! Session cookies: their format, signing and reading, the operator cookie and the
//! admin token (server only). Who may call what is checked with them in `caller.rs`.

use super::{
    ended_sessions::EndedSessions,
    operators::{Directory, TOKEN_ID},
    Role,
};
use axum::http::{header, HeaderMap};
use cookie::{Cookie, CookieJar, Key, SameSite};

/// Name of the shopper's session cookie (with the `__Host-` prefix when cookies are
/// `Secure`: the browser then refuses it from any subdomain or over plain HTTP).
pub(crate) const SESSION_COOKIE: &str = "seckill_session";
/// The operator's cookie keeps its first name, `seckill_admin`: browsers hold it by name.
pub(crate) const OPERATOR_COOKIE: &str = "seckill_admin";
const HOST_PREFIX: &str = "__Host-";

/// Sessions last a week; signing in again starts a new one. An operator's session
/// lasts a working day. Each expiry is inside the signed (or encrypted) value, so a cookie
/// kept past its `Max-Age` is still refused.
pub const SESSION_SECS: i64 = 7 * 24 * 3600;
const OPERATOR_SECS: i64 = 12 * 3600;
/// What a session value starts with: cookies of other formats (sessions from before
/// passwords) are refused.
const FORMAT: &str = "v2";

/// A shopper's session, as its cookie carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    pub user_id: i64,
    /// The name signed in with.
    pub name: String,
    /// The user's session generation when it was issued: ending every session of the
    /// user raises the generation and refuses the lower ones.
    pub generation: i64,
    /// This session's own id (random), to end it alone.
    pub id: String,
    /// When its cookie expires (Unix seconds).
    pub expires: i64,
}

/// Who is making an operator call: the admin token (bootstrap and automation; recorded as
/// `token`), or a named operator (as the operators table has them now, and the
/// generation their cookie was made in).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Actor {
    Token,
    Operator { id: i64, name: String, role: Role, generation: i64 },
}

impl Actor {
    /// The name an operator's actions are recorded under.
    pub fn name(&self) -> &str {
        match self {
            Self::Token => "token",
            Self::Operator { name, .. } => name,
        }
    }

    /// The token has the admin role.
    pub fn role(&self) -> Role {
        match self {
            Self::Token => Role::Admin,
            Self::Operator { role, .. } => *role,
        }
    }
}

impl std::fmt::Display for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What signs sessions and opens the admin door.
pub struct Secrets {
    key: Key,
    /// What a token is compared by ([`Secrets::token_matches`]).
    admin_token_digest: [u8; 32],
    /// Whether the admin token has the JWT form (`jwt::bearer_jwt`): when it has not, a
    /// bearer of that form is never a guess at it.
    admin_token_jwt_form: bool,
    /// What names' guessing counters are chosen by (`auth::attempts`): shared by every
    /// process with the session secret, unknown outside.
    pub attempts_key: [u8; 32],
    /// Cookies carry `Secure` and the `__Host-` prefix.
    secure: bool,
    /// The session cookie's full name (prefixed or not), which every grab looks for.
    session_name: String,
    /// Sessions ended early, followed from the database (`ended_sessions::follow`).
    pub ended: std::sync::Arc<EndedSessions>,
    /// The operators as they are now, followed from the database (`operators::follow`):
    /// an operator cookie names an operator, this says who they are and what they may do.
    pub operators: std::sync::Arc<Directory>,
}

impl Secrets {
    /// `session_secret` must have at least 32 bytes; `None` means a random key.
    pub fn new(session_secret: Option<&str>, admin_token: String, secure: bool) -> Result<Self, String> {
        let key = match session_secret {
            Some(s) if s.len() >= 32 => Key::derive_from(s.as_bytes()),
            Some(_) => return Err("SECKILL_SESSION_SECRET must be at least 32 bytes".into()),
            None => Key::generate(),
        };
        let session_name = cookie_name(secure, SESSION_COOKIE);
        let admin_token_digest = <sha2::Sha256 as sha2::Digest>::digest(admin_token.as_bytes()).into();
        let admin_token_jwt_form = has_jwt_form(&admin_token);
        let (ended, operators) = (Default::default(), Default::default());
        let attempts_key = derive(&key, "attempt counters");
        Ok(Self { key, admin_token_digest, admin_token_jwt_form, attempts_key, secure, session_name, ended, operators })
    }

    /// A key for `purpose`, derived from the session key: every process sharing the
    /// session secret derives the same one, and no two purposes share a key.
    pub fn derived_key(&self, purpose: &str) -> [u8; 32] {
        derive(&self.key, purpose)
    }

    /// The user id of a valid, unexpired, not ended session cookie in these headers.
    pub fn session_user(&self, headers: &HeaderMap) -> Option<i64> {
        self.session_key(headers).map(|key| key.user_id)
    }

    /// The session of a valid, unexpired, not ended session cookie in these headers, as
    /// [`Self::still_on`] asks of it again (every grab asks: the name in the cookie is
    /// not copied out).
    pub fn session_key(&self, headers: &HeaderMap) -> Option<SessionKey> {
        let cookie = self.session_cookie_sent(headers)?;
        let v = SessionValue::read(cookie.value())?;
        let key = SessionKey { user_id: v.user_id, generation: v.generation, expires: v.expires, id: v.id.into() };
        self.still_on(&key).then_some(key)
    }

    /// Whether a session whose cookie's signature held is still on: unexpired, and not
    /// ended (on any process: the copy of ended sessions is at most a second old).
    pub fn still_on(&self, key: &SessionKey) -> bool {
        key.expires > chrono::Utc::now().timestamp() && !self.ended.is_ended(key.user_id, key.generation, &key.id)
    }

    /// The session of a valid, unexpired, not ended session cookie in these headers.
    pub fn session(&self, headers: &HeaderMap) -> Option<Session> {
        let cookie = self.session_cookie_sent(headers)?;
        let v = SessionValue::read(cookie.value())?;
        if self.ended.is_ended(v.user_id, v.generation, v.id) {
            return None;
        }
        let (id, name) = (v.id.to_owned(), v.name.to_owned());
        Some(Session { user_id: v.user_id, name, generation: v.generation, id, expires: v.expires })
    }

    /// The session cookie in these headers, if its signature holds. Only it is decoded
    /// (the last one sent, as a jar keeps), and only its value: the name is known, and
    /// a sent cookie has no attributes.
    fn session_cookie_sent(&self, headers: &HeaderMap) -> Option<Cookie<'static>> {
        self.signed_sent(headers, &self.session_name)
    }

    /// The signed cookie `name` in these headers, if its signature holds.
    fn signed_sent(&self, headers: &HeaderMap, name: &str) -> Option<Cookie<'static>> {
        let (_, value) = sent_cookies(headers).filter(|(n, _)| *n == name).last()?;
        let value = percent_encoding::percent_decode_str(value).decode_utf8().ok()?;
        CookieJar::new().signed(&self.key).verify(Cookie::new(name.to_owned(), value.into_owned()))
    }

    /// Who makes this operator call: the admin token (bearer, or the cookie it bought), or
    /// the operator whose unexpired operator cookie it carries, as long as the operator is
    /// there and has not ended the cookie's generation (their role is the one they have
    /// now). A bearer token is all that counts when one is sent.
    pub fn actor(&self, headers: &HeaderMap) -> Option<Actor> {
        if let Some(token) = bearer(headers) {
            return self.token_matches(token).then_some(Actor::Token);
        }
        let jar = jar_of(headers);
        let cookie = jar.private(&self.key).get(&self.name(OPERATOR_COOKIE))?;
        let (kind, rest) = cookie.value().split_once('.')?;
        let (expires, rest) = rest.split_once('.')?;
        unexpired(expires)?;
        match kind {
            "tok" => {
                let (generation, digest) = rest.split_once('.')?;
                let current = self.operators.current(TOKEN_ID, generation.parse().ok()?);
                (current.is_some() && digest == self.token_digest_hex()).then_some(Actor::Token)
            }
            "op" => {
                let (id, generation) = rest.split_once('.')?;
                let (id, generation) = (id.parse().ok()?, generation.parse().ok()?);
                let now = self.operators.current(id, generation)?;
                Some(Actor::Operator { id, name: now.name, role: now.role, generation })
            }
            _ => None,
        }
    }

    /// The first half of the token's digest, as hex: what a token cookie names it by.
    fn token_digest_hex(&self) -> String {
        hex::encode(&self.admin_token_digest[..16])
    }

    /// Whether `candidate` could be the admin token by its form: one of the JWT form
    /// could not, unless the admin token has that form too.
    pub fn could_be_the_token(&self, candidate: &str) -> bool {
        self.admin_token_jwt_form || !has_jwt_form(candidate)
    }

    /// Compares the two tokens' SHA-256 digests in constant time: the time taken tells
    /// neither how much of a guess was right nor how long the token is.
    pub fn token_matches(&self, candidate: &str) -> bool {
        use sha2::{Digest, Sha256};
        use subtle::ConstantTimeEq;
        let theirs = Sha256::digest(candidate.as_bytes());
        self.admin_token_digest.as_slice().ct_eq(theirs.as_slice()).into()
    }

    /// A `Set-Cookie` value that starts a new session for `user_id`, who signed in as
    /// `name`, in the user's session `generation`. The name rides in the signed value,
    /// so asking who is signed in (every page view) reads no database.
    pub fn session_cookie(&self, user_id: i64, name: &str, generation: i64) -> String {
        let id = hex::encode(rand::random::<[u8; 16]>());
        let value = format!("{FORMAT}.{user_id}.{}.{generation}.{id}.{name}", expiry(SESSION_SECS));
        self.signed_cookie(SESSION_COOKIE, value, SESSION_SECS)
    }

    /// A `Set-Cookie` value that lets this browser make operator calls as `actor`. The
    /// value is encrypted: nobody can read or change who it names. A token cookie
    /// carries no token: the token's generation as this process last read it (signing
    /// out with one raises it, ending them all) and a digest of the token (a new token
    /// ends them too).
    pub fn operator_cookie(&self, actor: &Actor) -> String {
        let value = match actor {
            Actor::Token => {
                let generation = self.operators.current_generation(TOKEN_ID).unwrap_or(i64::MIN);
                format!("tok.{}.{generation}.{}", expiry(OPERATOR_SECS), self.token_digest_hex())
            }
            Actor::Operator { id, generation, .. } => format!("op.{}.{id}.{generation}", expiry(OPERATOR_SECS)),
        };
        let mut jar = CookieJar::new();
        jar.private_mut(&self.key).add(self.cookie(OPERATOR_COOKIE, value, OPERATOR_SECS));
        delta_header(&jar)
    }

    /// A `Set-Cookie` value for a signed cookie `base` (prefixed as every cookie here)
    /// carrying `value` for `max_age_secs`: readable by its holder, made only here.
    pub fn signed_cookie(&self, base: &str, value: String, max_age_secs: i64) -> String {
        let mut jar = CookieJar::new();
        jar.signed_mut(&self.key).add(self.cookie(base, value, max_age_secs));
        delta_header(&jar)
    }

    /// The value of the signed cookie `base` these headers carry, if its signature holds.
    pub fn signed_value(&self, headers: &HeaderMap, base: &str) -> Option<String> {
        self.signed_sent(headers, &self.name(base)).map(|c| c.value().to_owned())
    }

    /// `Set-Cookie` values that end the session and the operator session.
    pub fn clearing_cookies(&self) -> [String; 2] {
        [SESSION_COOKIE, OPERATOR_COOKIE].map(|name| {
            let mut c = self.cookie(name, String::new(), 0);
            c.make_removal();
            c.encoded().to_string()
        })
    }

    fn name(&self, base: &str) -> String {
        cookie_name(self.secure, base)
    }

    fn cookie(&self, name: &str, value: String, max_age_secs: i64) -> Cookie<'static> {
        Cookie::build((self.name(name), value))
            .path("/")
            .http_only(true)
            .secure(self.secure)
            .same_site(SameSite::Lax)
            .max_age(cookie::time::Duration::seconds(max_age_secs))
            .build()
    }
}

/// A key for `purpose` derived from `key` ([`Secrets::derived_key`]).
fn derive(key: &Key, purpose: &str) -> [u8; 32] {
    use sha2::Digest;
    let digest = sha2::Sha256::new_with_prefix(b"seckill derived key\0").chain_update(purpose).chain_update(b"\0");
    digest.chain_update(key.master()).finalize().into()
}

/// A cookie's name: with the `__Host-` prefix when cookies are `Secure`.
fn cookie_name(secure: bool, base: &str) -> String {
    if secure {
        format!("{HOST_PREFIX}{base}")
    } else {
        base.to_owned()
    }
}

/// The token of an `Authorization: Bearer <token>` header, trimmed.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    Some(value.strip_prefix("Bearer ")?.trim())
}

/// Whether a token has the JWT form (three dot-separated parts): what the shop's own
/// login takes (`jwt`).
pub fn has_jwt_form(token: &str) -> bool {
    token.split('.').count() == 3
}

/// The `(name, value)` pairs of the `Cookie` headers, as sent (values still encoded).
fn sent_cookies(headers: &HeaderMap) -> impl Iterator<Item = (&str, &str)> {
    let values = headers.get_all(header::COOKIE).into_iter().filter_map(|v| v.to_str().ok());
    let pairs = values.flat_map(|v| v.split(';')).filter_map(|pair| pair.split_once('='));
    pairs.map(|(name, value)| (name.trim(), value.trim()))
}

/// A session as its cookie named it, the signature checked: what is asked again, when
/// its request's handler runs, of whether it has ended since (a body may come up to the
/// request timeout after the headers the cookie came in).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionKey {
    pub user_id: i64,
    generation: i64,
    expires: i64,
    id: Box<str>,
}

/// A signed session value, `v2.<user>.<expiry>.<generation>.<id>.<name>`, read in place.
struct SessionValue<'a> {
    user_id: i64,
    expires: i64,
    generation: i64,
    id: &'a str,
    name: &'a str,
}

impl<'a> SessionValue<'a> {
    /// The value's parts, unless it has expired or has another format.
    fn read(value: &'a str) -> Option<Self> {
        let mut parts = value.splitn(6, '.');
        if parts.next()? != FORMAT {
            return None;
        }
        let user_id = parts.next()?.parse().ok()?;
        let expires = parts.next()?;
        unexpired(expires)?;
        let expires = expires.parse().ok()?;
        let generation = parts.next()?.parse().ok()?;
        let (id, name) = (parts.next()?, parts.next()?);
        Some(Self { user_id, expires, generation, id, name })
    }
}

/// Unix seconds `secs` from now.
pub(crate) fn expiry(secs: i64) -> i64 {
    chrono::Utc::now().timestamp() + secs
}

/// `Some` when the Unix time `expires` is still ahead.
pub(crate) fn unexpired(expires: &str) -> Option<()> {
    (expires.parse::<i64>().ok()? > chrono::Utc::now().timestamp()).then_some(())
}

fn delta_header(jar: &CookieJar) -> String {
    jar.delta().next().map(|c| c.encoded().to_string()).unwrap_or_default()
}

fn jar_of(headers: &HeaderMap) -> CookieJar {
    let mut jar = CookieJar::new();
    for value in headers.get_all(header::COOKIE) {
        let Ok(value) = value.to_str() else { continue };
        for cookie in Cookie::split_parse_encoded(value.to_owned()).flatten() {
            jar.add_original(cookie);
        }
    }
    jar
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::operators::Entry;
    use axum::http::HeaderValue;

    fn headers_with_cookie(set_cookie: &str) -> HeaderMap {
        let pair = set_cookie.split(';').next().unwrap().to_owned();
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_str(&pair).unwrap());
        h
    }

    /// A bearer of the JWT form is no guess at an admin token of another form; at one
    /// of that form it may be.
    #[test]
    fn only_a_bearer_of_the_admin_tokens_form_could_be_it() {
        let plain = Secrets::new(None, "a plain admin token".into(), false).unwrap();
        assert!(!plain.could_be_the_token("header.claims.signature"));
        assert!(plain.could_be_the_token("a plain guess at it"));
        let dotted = Secrets::new(None, "admin.token.of-three-parts".into(), false).unwrap();
        assert!(dotted.could_be_the_token("header.claims.signature"));
    }

    #[test]
    fn session_cookie_round_trips_and_rejects_tampering() {
        let s = Secrets::new(None, "tok".into(), false).unwrap();
        let set = s.session_cookie(7, "ann", 0);
        assert!(set.contains("HttpOnly"));
        assert_eq!(s.session_user(&headers_with_cookie(&set)), Some(7));
        let pair = set.split(';').next().unwrap();
        // Change the last character (the name's last) to a different one.
        let last = if pair.ends_with('A') { 'B' } else { 'A' };
        let forged = format!("{}{last}", &pair[..pair.len() - 1]);
        assert_eq!(s.session_user(&headers_with_cookie(&forged)), None);
        let other = Secrets::new(None, "tok".into(), false).unwrap();
        assert_eq!(other.session_user(&headers_with_cookie(&set)), None);
    }

    #[test]
    fn session_cookies_of_any_user_round_trip_prefixed_or_not() {
        // Many signatures, so some hold the base64 characters sent percent-encoded.
        for secure in [false, true] {
            let s = Secrets::new(None, "tok".into(), secure).unwrap();
            for user in 1..200 {
                let set = s.session_cookie(user, "ann", 3);
                assert_eq!(set.starts_with("__Host-"), secure);
                assert_eq!(s.session_user(&headers_with_cookie(&set)), Some(user), "{set}");
            }
        }
    }

    #[test]
    fn the_session_carries_the_name_signed_in_with() {
        let s = Secrets::new(None, "tok".into(), true).unwrap();
        for name in ["ann", "Zoë.Q; x=1", "李 雷", "a.b.c", "%41"] {
            let session = s.session(&headers_with_cookie(&s.session_cookie(42, name, 5))).unwrap();
            assert_eq!((session.user_id, session.name.as_str(), session.generation), (42, name, 5), "{name}");
            assert_eq!(session.id.len(), 32);
        }
        // A session from before passwords (`<user>.<expiry>.<name>`) is refused.
        let mut jar = CookieJar::new();
        let old = format!("42.{}.ann", expiry(SESSION_SECS));
        jar.signed_mut(&s.key).add(s.cookie(SESSION_COOKIE, old, SESSION_SECS));
        assert_eq!(s.session(&headers_with_cookie(&delta_header(&jar))), None);
    }

    #[test]
    fn an_ended_session_is_refused_and_each_session_has_its_own_id() {
        use super::super::store::EndedRow;
        let s = Secrets::new(None, "tok".into(), false).unwrap();
        let (first, second) = (s.session_cookie(7, "ann", 1), s.session_cookie(7, "ann", 1));
        let id = s.session(&headers_with_cookie(&first)).unwrap().id;
        assert_ne!(id, s.session(&headers_with_cookie(&second)).unwrap().id);
        let ended = |id, session_id: Option<&str>, generation| EndedRow {
            id,
            user_id: 7,
            session_id: session_id.map(str::to_owned),
            generation,
            expires_at: i64::MAX,
        };
        s.ended.apply(&[ended(1, Some(&id), None)]);
        assert_eq!(s.session_user(&headers_with_cookie(&first)), None, "signed out");
        assert_eq!(s.session_user(&headers_with_cookie(&second)), Some(7), "the other session goes on");
        s.ended.apply(&[ended(2, None, Some(2))]);
        assert_eq!(s.session_user(&headers_with_cookie(&second)), None, "signed out everywhere");
        assert_eq!(s.session_user(&headers_with_cookie(&s.session_cookie(7, "ann", 2))), Some(7));
    }

    #[test]
    fn admin_needs_the_exact_token() {
        let s = Secrets::new(Some(&"k".repeat(32)), "secret-token".into(), false).unwrap();
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer secret-token"));
        assert_eq!(s.actor(&h), Some(Actor::Token));
        for wrong in ["Bearer secret-tokem", "Bearer secret-token-and-more", "Bearer secret", "Bearer "] {
            h.insert(header::AUTHORIZATION, HeaderValue::from_static(wrong));
            assert_eq!(s.actor(&h), None, "{wrong}");
        }
        assert_eq!(s.actor(&HeaderMap::new()), None);
        let token = |generation| (TOKEN_ID, Entry { name: "token".into(), role: Role::Admin, generation });
        s.operators.replace([token(0)].into());
        let token_cookie = s.operator_cookie(&Actor::Token);
        assert!(!token_cookie.contains("secret-token"), "no cookie carries the token");
        assert_eq!(s.actor(&headers_with_cookie(&token_cookie)), Some(Actor::Token));
        s.operators.replace([token(1)].into());
        assert_eq!(s.actor(&headers_with_cookie(&token_cookie)), None, "signed out with the token");
        s.operators.replace([token(0)].into());
        let op = Actor::Operator { id: 3, name: "Ops.Olga".into(), role: Role::Operator, generation: 4 };
        let cookie = headers_with_cookie(&s.operator_cookie(&op));
        assert_eq!(s.actor(&cookie), None, "no such operator");
        let entry = |role, generation| Entry { name: "Ops.Olga".into(), role, generation };
        s.operators.replace([(3, entry(Role::Operator, 4)), token(0)].into());
        assert_eq!(s.actor(&cookie), Some(op.clone()));
        s.operators.replace([(3, entry(Role::Admin, 4))].into());
        assert_eq!(s.actor(&cookie).map(|a| a.role()), Some(Role::Admin), "the role they have now");
        s.operators.replace([(3, entry(Role::Admin, 5))].into());
        assert_eq!(s.actor(&cookie), None, "signed out: a newer generation");
        s.operators.replace(Default::default());
        assert_eq!(s.actor(&cookie), None, "removed");
        let other = Secrets::new(Some(&"k".repeat(32)), "another-token".into(), false).unwrap();
        other.operators.replace([token(0)].into());
        s.operators.replace([token(0)].into());
        assert_eq!(other.actor(&headers_with_cookie(&s.operator_cookie(&Actor::Token))), None, "token changed");
        assert!(Secrets::new(Some("short"), "t".into(), false).is_err());
    }

    #[test]
    fn secure_cookies_carry_the_host_prefix_and_an_expiry_inside() {
        let s = Secrets::new(Some(&"k".repeat(32)), "secret-token".into(), true).unwrap();
        let set = s.session_cookie(7, "ann", 0);
        assert!(set.starts_with("__Host-seckill_session=") && set.contains("Secure"), "{set}");
        assert_eq!(s.session_user(&headers_with_cookie(&set)), Some(7));
        s.operators.replace([(TOKEN_ID, Entry { name: "token".into(), role: Role::Admin, generation: 0 })].into());
        assert_eq!(s.actor(&headers_with_cookie(&s.operator_cookie(&Actor::Token))), Some(Actor::Token));
        let plain = Secrets::new(Some(&"k".repeat(32)), "secret-token".into(), false).unwrap();
        assert_eq!(plain.session_user(&headers_with_cookie(&set)), None, "names differ by mode");

        // A validly signed value whose expiry has passed is refused, whatever Max-Age said.
        let mut jar = CookieJar::new();
        let stale = format!("{FORMAT}.7.{}.0.id.ann", chrono::Utc::now().timestamp() - 1);
        jar.signed_mut(&s.key).add(s.cookie(SESSION_COOKIE, stale, 3600));
        assert_eq!(s.session_user(&headers_with_cookie(&delta_header(&jar))), None);
        let mut jar = CookieJar::new();
        let stale = format!("tok.{}.secret-token", chrono::Utc::now().timestamp() - 1);
        jar.private_mut(&s.key).add(s.cookie(OPERATOR_COOKIE, stale, 3600));
        assert_eq!(s.actor(&headers_with_cookie(&delta_header(&jar))), None);
    }
}
