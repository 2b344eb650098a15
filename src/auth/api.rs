//! Sign-in endpoints: `/api/sign_in`, `/api/sign_out`, `/api/me`, `/api/admin_sign_in`.

use super::User;
use crate::error::AppResult;
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    super::{
        session::{current_session, require_admin, set_cookie},
        store,
    },
    crate::{error::ErrorCode, state::AppState},
};

/// Signs in by name (same name, same user) and sets the session cookie.
#[server(prefix = "/api", endpoint = "sign_in", input = Json)]
pub async fn sign_in(name: String) -> AppResult<User> {
    let name = super::validate_name(&name)?;
    let state = expect_context::<AppState>();
    let user_id = store::user_by_name(&state.backend.db, &name).await?;
    set_cookie(&state.secrets.session_cookie(user_id, &name))?;
    Ok(User { user_id, name })
}

/// Ends the session (and the admin session of this browser).
#[server(prefix = "/api", endpoint = "sign_out", input = Json)]
pub async fn sign_out() -> AppResult<()> {
    let state = expect_context::<AppState>();
    state.secrets.clearing_cookies().iter().try_for_each(|c| set_cookie(c))
}

/// The signed-in shopper, if any.
#[server(prefix = "/api", endpoint = "me", input = Json)]
pub async fn me() -> AppResult<Option<User>> {
    let state = expect_context::<AppState>();
    let Some(session) = current_session(&state.secrets) else { return Ok(None) };
    let name = match session.name {
        Some(name) => Some(name),
        // A session started before cookies kept the name.
        None => store::name_of(&state.backend.db, session.user_id).await?,
    };
    Ok(name.map(|name| User { user_id: session.user_id, name }))
}

/// Checks the admin token and, if right, sets the admin cookie for the admin page.
#[server(prefix = "/api", endpoint = "admin_sign_in", input = Json)]
pub async fn admin_sign_in(token: String) -> AppResult<()> {
    let state = expect_context::<AppState>();
    if !state.secrets.token_matches(token.trim()) {
        return Err(ErrorCode::AdminRequired.into());
    }
    set_cookie(&state.secrets.admin_cookie())
}

/// True when this browser holds the admin cookie (or the call carries the token).
#[server(prefix = "/api", endpoint = "admin_status", input = Json)]
pub async fn admin_status() -> AppResult<bool> {
    let state = expect_context::<AppState>();
    Ok(require_admin(&state.secrets).is_ok())
}
