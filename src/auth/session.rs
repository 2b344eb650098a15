//! Session cookies and the admin check (server only).

use crate::error::{AppError, AppResult, ErrorCode};
use axum::http::{header, request::Parts, HeaderMap, HeaderValue};
use cookie::{Cookie, CookieJar, Key, SameSite};
use leptos::prelude::*;
use leptos_axum::ResponseOptions;

/// Name of the shopper's session cookie.
pub const SESSION_COOKIE: &str = "seckill_session";
const ADMIN_COOKIE: &str = "seckill_admin";

/// What signs sessions and opens the admin door.
pub struct Secrets {
    key: Key,
    admin_token: String,
}

impl Secrets {
    /// `session_secret` must have at least 32 bytes; `None` means a random key.
    pub fn new(session_secret: Option<&str>, admin_token: String) -> Result<Self, String> {
        let key = match session_secret {
            Some(s) if s.len() >= 32 => Key::derive_from(s.as_bytes()),
            Some(_) => return Err("SECKILL_SESSION_SECRET must be at least 32 bytes".into()),
            None => Key::generate(),
        };
        Ok(Self { key, admin_token })
    }

    /// The user id of a valid session cookie in these headers.
    pub fn session_user(&self, headers: &HeaderMap) -> Option<i64> {
        let jar = jar_of(headers);
        let cookie = jar.signed(&self.key).get(SESSION_COOKIE)?;
        cookie.value().parse().ok()
    }

    /// True when the headers carry the admin token (bearer or admin cookie).
    pub fn is_admin(&self, headers: &HeaderMap) -> bool {
        let bearer =
            headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        if let Some(token) = bearer {
            return self.token_matches(token.trim());
        }
        let jar = jar_of(headers);
        let cookie = jar.private(&self.key).get(ADMIN_COOKIE);
        cookie.is_some_and(|c| self.token_matches(c.value()))
    }

    /// Compares in constant time, so the token cannot be guessed byte by byte.
    pub fn token_matches(&self, candidate: &str) -> bool {
        let (a, b) = (self.admin_token.as_bytes(), candidate.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    /// A `Set-Cookie` value that starts a session for `user_id`.
    pub fn session_cookie(&self, user_id: i64) -> String {
        let mut jar = CookieJar::new();
        jar.signed_mut(&self.key).add(base_cookie(SESSION_COOKIE, user_id.to_string()));
        delta_header(&jar)
    }

    /// A `Set-Cookie` value that lets this browser make admin calls.
    pub fn admin_cookie(&self) -> String {
        let mut jar = CookieJar::new();
        jar.private_mut(&self.key).add(base_cookie(ADMIN_COOKIE, self.admin_token.clone()));
        delta_header(&jar)
    }
}

/// `Set-Cookie` values that end the session and the admin session.
pub fn clearing_cookies() -> [String; 2] {
    [SESSION_COOKIE, ADMIN_COOKIE].map(|name| {
        let mut c = base_cookie(name, String::new());
        c.make_removal();
        c.encoded().to_string()
    })
}

/// Sessions last a week; signing in again starts a new one.
const SESSION_DAYS: i64 = 7;

fn base_cookie(name: &'static str, value: String) -> Cookie<'static> {
    Cookie::build((name, value))
        .path("/")
        .http_only(true)
        .same_site(SameSite::Lax)
        .max_age(cookie::time::Duration::days(SESSION_DAYS))
        .build()
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

/// The headers of the request being served (inside a server function).
fn request_headers() -> HeaderMap {
    use_context::<Parts>().map(|p| p.headers).unwrap_or_default()
}

/// The signed-in shopper's id, or `not_signed_in`.
pub fn require_user(secrets: &Secrets) -> AppResult<i64> {
    secrets.session_user(&request_headers()).ok_or_else(|| ErrorCode::NotSignedIn.into())
}

/// Succeeds only for callers holding the admin token.
pub fn require_admin(secrets: &Secrets) -> AppResult<()> {
    if secrets.is_admin(&request_headers()) {
        Ok(())
    } else {
        Err(ErrorCode::AdminRequired.into())
    }
}

/// Adds a `Set-Cookie` header to the server function's response.
pub fn set_cookie(value: &str) -> AppResult<()> {
    let value = HeaderValue::from_str(value).map_err(|e| AppError::internal("cookie header", e))?;
    expect_context::<ResponseOptions>().append_header(header::SET_COOKIE, value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers_with_cookie(set_cookie: &str) -> HeaderMap {
        let pair = set_cookie.split(';').next().unwrap().to_owned();
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_str(&pair).unwrap());
        h
    }

    #[test]
    fn session_cookie_round_trips_and_rejects_tampering() {
        let s = Secrets::new(None, "tok".into()).unwrap();
        let set = s.session_cookie(7);
        assert!(set.contains("HttpOnly"));
        assert_eq!(s.session_user(&headers_with_cookie(&set)), Some(7));
        let pair = set.split(';').next().unwrap();
        let forged = format!("{}8", &pair[..pair.len() - 1]);
        assert_eq!(s.session_user(&headers_with_cookie(&forged)), None);
        let other = Secrets::new(None, "tok".into()).unwrap();
        assert_eq!(other.session_user(&headers_with_cookie(&set)), None);
    }

    #[test]
    fn admin_needs_the_exact_token() {
        let s = Secrets::new(Some(&"k".repeat(32)), "secret-token".into()).unwrap();
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer secret-token"));
        assert!(s.is_admin(&h));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer secret-tokem"));
        assert!(!s.is_admin(&h));
        assert!(!s.is_admin(&HeaderMap::new()));
        assert!(s.is_admin(&headers_with_cookie(&s.admin_cookie())));
        assert!(Secrets::new(Some("short"), "t".into()).is_err());
    }
}
