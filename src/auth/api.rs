//! Sign-in endpoints: `/api/sign_in`, `/api/sign_out`, `/api/me`, `/api/admin_sign_in`.

use super::User;
use crate::error::AppResult;
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    super::session::{clearing_cookies, require_user, set_cookie},
    crate::{error::AppError, state::AppState},
};

/// Signs in by name (same name, same user) and sets the session cookie.
#[server(prefix = "/api", endpoint = "sign_in", input = Json)]
pub async fn sign_in(name: String) -> AppResult<User> {
    let name = super::validate_name(&name)?;
    let state = expect_context::<AppState>();
    let now = chrono::Utc::now().timestamp_millis();
    sqlx::query("INSERT INTO users (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING")
        .bind(&name)
        .bind(now)
        .execute(&state.db)
        .await
        .map_err(|e| AppError::unavailable("sign_in insert", e))?;
    let user_id: i64 = sqlx::query_scalar("SELECT id FROM users WHERE name = ?")
        .bind(&name)
        .fetch_one(&state.db)
        .await
        .map_err(|e| AppError::unavailable("sign_in select", e))?;
    set_cookie(&state.secrets.session_cookie(user_id))?;
    Ok(User { user_id, name })
}

/// Ends the session (and the admin session of this browser).
#[server(prefix = "/api", endpoint = "sign_out", input = Json)]
pub async fn sign_out() -> AppResult<()> {
    clearing_cookies().iter().try_for_each(|c| set_cookie(c))
}

/// The signed-in shopper, if any.
#[server(prefix = "/api", endpoint = "me", input = Json)]
pub async fn me() -> AppResult<Option<User>> {
    let state = expect_context::<AppState>();
    let Ok(user_id) = require_user(&state.secrets) else { return Ok(None) };
    let name: Option<String> = sqlx::query_scalar("SELECT name FROM users WHERE id = ?")
        .bind(user_id)
        .fetch_optional(&state.db)
        .await
        .map_err(|e| AppError::unavailable("me", e))?;
    Ok(name.map(|name| User { user_id, name }))
}

/// Checks the admin token and, if right, sets the admin cookie for the admin page.
#[server(prefix = "/api", endpoint = "admin_sign_in", input = Json)]
pub async fn admin_sign_in(token: String) -> AppResult<()> {
    let state = expect_context::<AppState>();
    if !state.secrets.token_matches(token.trim()) {
        return Err(crate::error::ErrorCode::AdminRequired.into());
    }
    set_cookie(&state.secrets.admin_cookie())
}

/// True when this browser holds the admin cookie (or the call carries the token).
#[server(prefix = "/api", endpoint = "admin_status", input = Json)]
pub async fn admin_status() -> AppResult<bool> {
    let state = expect_context::<AppState>();
    Ok(super::session::require_admin(&state.secrets).is_ok())
}
