//! Who is calling: the shopper or the operator behind the request being served, the
//! checks a server function makes with them (server only), and the cookies it sets.
//! The front door checks each route's access first (`server::access`) and hands what
//! it found on the request ([`SessionChecked`], [`Caller`]), so a handler reads no
//! cookie twice.

use super::{
    context::Context,
    session::{Actor, Secrets, Session},
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

/// The signed-in shopper's id, or `not_signed_in` (inside a server function).
pub async fn require_user() -> AppResult<i64> {
    shopper(&Context::get(), &use_context::<Parts>().unwrap_or_else(|| Request::new(()).into_parts().0)).await
}

/// What the front door found when it checked the session cookie (for the per-shopper
/// rate limit): the user, or none. Set on the request so the handler does not check
/// the cookie's signature a second time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionChecked(pub Option<i64>);

/// The signed-in shopper's session, if any (inside a server function).
pub fn current_session(secrets: &Secrets) -> Option<Session> {
    secrets.session(&request_headers())
}

/// The id of the shopper these request headers carry, or `not_signed_in`: a session
/// cookie (no database read), or, with the shop's own login, the shop's token (a
/// database read on a subject's first call to this process only).
pub async fn shopper(state: &Context, request: &Parts) -> AppResult<i64> {
    let checked = request.extensions.get::<SessionChecked>().copied();
    let session = checked.unwrap_or_else(|| SessionChecked(state.secrets.session_user(&request.headers)));
    if let SessionChecked(Some(user_id)) = session {
        return Ok(user_id);
    }
    if let Some(login) = &state.shop_login {
        if let Some(found) = login.shopper(&state.backend.db, &request.headers).await {
            return found;
        }
    }
    Err(ErrorCode::NotSignedIn.into())
}

/// The operator the front door found for a route its access table keeps for
/// operators (`server::access`), handed to the handler on the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller(pub Actor);

/// The operator (or the admin token) making this call, or `admin_required`: the one the
/// front door found, or (a server function called in-process, as a page renders) the
/// one the request's headers name.
pub fn require_operator() -> AppResult<Actor> {
    let parts = use_context::<Parts>();
    if let Some(Caller(actor)) = parts.as_ref().and_then(|p| p.extensions.get::<Caller>()) {
        return Ok(actor.clone());
    }
    Context::get().secrets.actor(&request_headers()).ok_or_else(|| ErrorCode::AdminRequired.into())
}

/// As [`require_operator`], for what only the admin role may do.
pub fn require_admin_role() -> AppResult<Actor> {
    let actor = require_operator()?;
    if actor.role() == Role::Admin {
        Ok(actor)
    } else {
        Err(AppError { code: ErrorCode::AdminRequired, message: "This needs an admin.".into() })
    }
}

/// Adds a `Set-Cookie` header to the server function's response.
pub fn set_cookie(value: &str) -> AppResult<()> {
    let value = HeaderValue::from_str(value).map_err(|e| AppError::internal("cookie header", e))?;
    expect_context::<ResponseOptions>().append_header(header::SET_COOKIE, value);
    Ok(())
}
