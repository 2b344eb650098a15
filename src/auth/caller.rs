//! Who is calling: the shopper or the operator behind the request being served, the
//! checks a server function makes with them (server only), and the cookies it sets.
//! The front door checks each route's access first (`server::access`) and hands what
//! it found on the request ([`SessionChecked`], [`Caller`]), so a handler reads no
//! cookie twice.

use super::{
    context::Context,
    session::{Actor, Secrets, Session, SessionKey},
    Role,
};
use crate::error::{AppError, AppResult, ErrorCode};
use axum::http::{header, request::Parts, HeaderMap, HeaderValue, Request};
use leptos::prelude::*;
use leptos_axum::ResponseOptions;

/// The headers of the request being served (inside a server function).
fn request_headers() -> HeaderMap {
    use_context::<Parts>().map(|p| p.headers).unwrap_or_default()
}

/// A server function the access table (`server::access`) keeps for signed-in
/// shoppers. The table's macro declares it, and only such a function's handler may
/// ask for its shopper ([`user`], [`shopper`]): a handler asking for a caller its
/// route is not declared for does not compile.
#[diagnostic::on_unimplemented(message = "`{Self}` is not kept for shoppers in the access table (`server::access`)")]
pub trait ForShoppers {}

/// A server function the access table keeps for operators of any role (the admin
/// role's too): only its handler may ask for its operator ([`operator`]).
#[diagnostic::on_unimplemented(message = "`{Self}` is not kept for operators in the access table (`server::access`)")]
pub trait ForOperators {}

/// A server function the access table keeps for the admin role: only its handler may
/// ask for its admin ([`admin`]).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not kept for the admin role in the access table (`server::access`)"
)]
pub trait ForAdmins: ForOperators {}

/// The signed-in shopper calling `F` (inside its server function): the one the front
/// door admitted.
pub async fn user<F: ForShoppers>() -> AppResult<i64> {
    shopper::<F>(&Context::get(), &use_context::<Parts>().unwrap_or_else(|| Request::new(()).into_parts().0)).await
}

/// What the front door found when it checked the session cookie (for the per-shopper
/// rate limit, as the headers came): the session, or none. Set on the request so the
/// handler does not check the cookie's signature a second time; whether the session
/// is still on is asked again when it is used ([`SessionChecked::user`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionChecked(pub Option<SessionKey>);

impl SessionChecked {
    /// The session's user, if the session is on now: a request's body, and so its
    /// handler, may come long after its headers, and a session ended meanwhile (signed
    /// out everywhere, a new password) must not act.
    pub fn user(&self, secrets: &Secrets) -> Option<i64> {
        self.0.as_ref().filter(|key| secrets.still_on(key)).map(|key| key.user_id)
    }
}

/// The signed-in shopper's session, if any (inside a server function).
pub fn current_session(secrets: &Secrets) -> Option<Session> {
    secrets.session(&request_headers())
}

/// The shopper calling `F`, or `not_signed_in`: the session the front door checked
/// (`SessionChecked`, no second look at the cookie), or, with the shop's own login, the
/// shop's token (a database read on a subject's first call to this process only).
/// Called in-process (a page rendering), the request's cookie is read.
pub async fn shopper<F: ForShoppers>(state: &Context, request: &Parts) -> AppResult<i64> {
    let checked = request.extensions.get::<SessionChecked>();
    let user = checked.map_or_else(|| state.secrets.session_user(&request.headers), |c| c.user(&state.secrets));
    if let Some(user_id) = user {
        return Ok(user_id);
    }
    if let Some(login) = &state.shop_login {
        if let Some(found) = login.shopper(&state.backend.db, &request.extensions, &request.headers).await {
            return found;
        }
    }
    Err(ErrorCode::NotSignedIn.into())
}

/// The operator the front door found for a route its access table keeps for
/// operators (`server::access`), handed to the handler on the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller(pub Actor);

/// The operator (or the admin token) calling `F`, or `admin_required`: the one the
/// front door admitted by the table, checked nowhere else; or, for a server function
/// called in-process (a page rendering, which no table entry covers), the one the
/// request's cookies name.
pub fn operator<F: ForOperators>() -> AppResult<Actor> {
    admitted().map_or_else(|| in_process(None), Ok)
}

/// The admin calling `F`: as [`operator`], the role proved by the front door (the
/// table keeps `F` for the admin role), or, in-process, checked here.
pub fn admin<F: ForAdmins>() -> AppResult<Actor> {
    admitted().map_or_else(|| in_process(Some(Role::Admin)), Ok)
}

/// Who runs this browser's operator session, if anyone (for the routes anyone may
/// call that answer differently for operators: no access is checked with it).
pub fn current_operator() -> Option<Actor> {
    admitted().or_else(|| Context::get().secrets.actor(&request_headers()))
}

/// The operator the front door admitted this request as (`Caller`), if it did.
fn admitted() -> Option<Actor> {
    let parts = use_context::<Parts>()?;
    parts.extensions.get::<Caller>().map(|Caller(actor)| actor.clone())
}

/// The operator a server function called in-process runs as, from the request's
/// cookies, with the role asked for.
fn in_process(role: Option<Role>) -> AppResult<Actor> {
    let actor = current_operator().ok_or(ErrorCode::OperatorRequired)?;
    match role {
        Some(role) if actor.role() != role => Err(needs_an_admin()),
        _ => Ok(actor),
    }
}

/// The refusal of an operator without the admin role where it is needed.
pub fn needs_an_admin() -> AppError {
    AppError::with(ErrorCode::OperatorRequired, "This needs an admin.")
}

/// The calls whose answer sets (or clears) cookies, by name: the API document says
/// `Set-Cookie` for these and no others. [`set_cookie`] holds a call to it in the
/// builds tests run, and a test checks that each sets one.
pub const SETS_COOKIES: [&str; 8] = [
    "sign_up",
    "sign_in",
    "change_password",
    "sign_out",
    "sign_out_everywhere",
    "admin_sign_in",
    "operator_sign_in",
    "change_operator_password",
];

/// Adds a `Set-Cookie` header to the server function's response.
pub fn set_cookie(value: &str) -> AppResult<()> {
    #[cfg(debug_assertions)]
    if let Some(parts) = use_context::<Parts>() {
        let call = parts.uri.path().rsplit('/').next().unwrap_or_default();
        assert!(SETS_COOKIES.contains(&call), "{call} sets a cookie: list it in SETS_COOKIES");
    }
    let value = HeaderValue::from_str(value).map_err(|e| AppError::internal("cookie header", e))?;
    expect_context::<ResponseOptions>().append_header(header::SET_COOKIE, value);
    Ok(())
}
