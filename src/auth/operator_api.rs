//! The operators' account endpoints: `/api/operator_sign_in`, `/api/admin_sign_in`
//! (the token), `/api/add_operator`, `/api/list_operators`, `/api/remove_operator`,
//! `/api/set_operator_role`, `/api/change_operator_password`, `/api/operator_me`,
//! `/api/admin_status`. Passwords are checked as shoppers' are (`api::check`).

use super::{CurrentOperator, ListedOperator, Operator, Role};
use crate::error::AppResult;
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    super::{
        api::{check, client_address},
        attempts::{self, Target},
        caller::{admin, current_operator, operator, set_cookie},
        context::Context,
        names, operators, password,
        session::Actor,
        validate_name,
    },
    crate::{
        audit::store::{self as audit, Record},
        error::{AppError, ErrorCode},
    },
};

/// Checks the admin token and, if right, sets the operator cookie for the admin page.
/// Guesses are limited like passwords.
#[server(prefix = "/api", endpoint = "admin_sign_in", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn admin_sign_in(token: String) -> AppResult<()> {
    let state = Context::get();
    let right = state.secrets.token_matches(token.trim());
    attempts::admin_token(&state.backend, client_address(), right).await?;
    if !right {
        return Err(ErrorCode::OperatorRequired.into());
    }
    // The cookie names the token's generation as it is now.
    state.secrets.operators.catch_up(&state.backend.db).await?;
    set_cookie(&state.secrets.operator_cookie(&Actor::Token))
}
crate::error::refuses!(AdminSignIn: OperatorRequired);

/// Signs an operator in by name and password and sets the operator cookie, which names
/// them. Wrong name or password: `bad_credentials`; guesses are limited as shoppers'.
#[server(prefix = "/api", endpoint = "operator_sign_in", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn operator_sign_in(name: String, password: String) -> AppResult<Operator> {
    let forms = names::signed_in_as(&name)?;
    let name = &forms[0];
    let state = Context::get();
    let operator = check(&state, &Target::Operator(name), ("password", password), async {
        let db = &state.backend.db;
        let operator = names::first_found(&forms, |name| async move { operators::by_name(db, &name).await }).await?;
        Ok(operator.map(|o| (Some(o.password_hash.clone()), o)))
    })
    .await?;
    let (id, generation) = (operator.id, operator.generation);
    let actor = Actor::Operator { id, name: operator.name.clone(), role: operator.role, generation };
    operators::signed_in(&state.backend.db, id).await?;
    // This process knows them from their first call, whichever process added them.
    state.secrets.operators.catch_up(&state.backend.db).await?;
    set_cookie(&state.secrets.operator_cookie(&actor))?;
    set_cookie(&attempts::known_browser(&state.secrets, &Target::Operator(name)))?;
    tracing::info!(%actor, "operator signed in");
    Ok(Operator { name: operator.name, role: operator.role })
}
crate::error::refuses!(OperatorSignIn: BadCredentials);

/// Every operator with their role and last sign-in (admins only).
#[server(prefix = "/api", endpoint = "list_operators", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn list_operators() -> AppResult<Vec<ListedOperator>> {
    let state = Context::get();
    admin::<ListOperators>()?;
    Ok(operators::list(&state.backend.db).await?)
}
crate::error::refuses!(ListOperators:);

/// Removes an operator (admins only): from when this answers, their cookies are refused
/// on every process within a second. The last admin cannot be removed (`last_admin`);
/// an unknown name answers `unknown_operator`.
#[server(prefix = "/api", endpoint = "remove_operator", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn remove_operator(name: String) -> AppResult<()> {
    let state = Context::get();
    let actor = admin::<RemoveOperator>()?;
    let name = validate_name(&name)?;
    let before = operators::remove(&state.backend.db, &name).await??;
    caught_up(&state).await;
    tracing::info!(%actor, operator = %name, "operator removed");
    let before = Some(serde_json::json!({ "name": name, "role": before.as_str() }));
    let record = Record { actor: actor.name(), action: "remove_operator", voucher_id: None, before, after: None };
    audit::record(&state.backend.db, record).await;
    Ok(())
}
crate::error::refuses!(RemoveOperator: UnknownOperator, LastAdmin);

/// Gives an operator another role (admins only): their next call on every process,
/// within a second, has the new one. The last admin cannot be demoted (`last_admin`).
#[server(prefix = "/api", endpoint = "set_operator_role", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn set_operator_role(name: String, role: Role) -> AppResult<Operator> {
    let state = Context::get();
    let actor = admin::<SetOperatorRole>()?;
    let name = validate_name(&name)?;
    let before = operators::set_role(&state.backend.db, &name, role).await??;
    caught_up(&state).await;
    tracing::info!(%actor, operator = %name, role = role.as_str(), "operator's role set");
    let record = Record {
        actor: actor.name(),
        action: "set_operator_role",
        voucher_id: None,
        before: Some(serde_json::json!({ "name": name, "role": before.as_str() })),
        after: Some(serde_json::json!({ "name": name, "role": role.as_str() })),
    };
    audit::record(&state.backend.db, record).await;
    Ok(Operator { name, role })
}
crate::error::refuses!(SetOperatorRole: UnknownOperator, LastAdmin);

/// Changes the signed-in operator's own password (the current one is asked again) and
/// ends their other operator cookies; this browser gets a new one.
#[server(prefix = "/api", endpoint = "change_operator_password", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn change_operator_password(current: String, new: String) -> AppResult<()> {
    let state = Context::get();
    let Actor::Operator { id, name, role, .. } = operator::<ChangeOperatorPassword>()? else {
        return Err(AppError::invalid("The admin token has no password to change."));
    };
    password::check_new("new", &new)?;
    check(&state, &Target::Operator(&name), ("current", current), async {
        let operator = operators::by_name(&state.backend.db, &name).await?;
        Ok(operator.filter(|o| o.id == id).map(|o| (Some(o.password_hash.clone()), ())))
    })
    .await?;
    let hash = state.hasher.hash(new).await?;
    // Removed while the hash was made: no operator now, as the next call would find.
    let ended = operators::end_sessions(&state.backend.db, id, Some(&hash)).await?;
    let generation = ended.ok_or(ErrorCode::OperatorRequired)?;
    caught_up(&state).await;
    let actor = Actor::Operator { id, name, role, generation };
    tracing::info!(%actor, "operator's password changed; other operator cookies ended");
    let record =
        Record { actor: actor.name(), action: "change_operator_password", voucher_id: None, before: None, after: None };
    audit::record(&state.backend.db, record).await;
    set_cookie(&state.secrets.operator_cookie(&actor))
}
crate::error::refuses!(ChangeOperatorPassword: BadCredentials);

/// Brings this process's copy of the operators up to date after a change this call
/// made, so that its next call sees it. A failure is logged, not answered: the change
/// is made, and an answer of `unavailable` would tell a keyed retry that it was not
/// (the retry would then find it made: `unknown_operator`, `bad_credentials`; a
/// review, 2026-12-02). The copy's follower reads the table again within a second.
#[cfg(feature = "ssr")]
async fn caught_up(state: &Context) {
    if let Err(e) = state.secrets.operators.catch_up(&state.backend.db).await {
        tracing::warn!("operators changed; this process's copy not read again: {e} (its follower reads it)");
    }
}

/// Adds an operator (admins only): a name (1–32 characters), a password (as a
/// shopper's) and a role, `operator` or `admin`. A name taken, or one that passes for
/// it, answers `name_taken` (names are held to the rules of shoppers' `sign_up`).
#[server(prefix = "/api", endpoint = "add_operator", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn add_operator(name: String, password: String, role: Role) -> AppResult<Operator> {
    let state = Context::get();
    let actor = admin::<AddOperator>()?;
    let name = names::new_name(&name)?;
    operators::check_not_reserved(&name)?;
    password::check_new("password", &password)?;
    if names::taken(&state.backend.db, "operators", &name).await? {
        return Err(names::taken_refusal());
    }
    let hash = state.hasher.hash(password).await?;
    operators::create(&state.backend.db, &name, &hash, role).await?.ok_or_else(names::taken_refusal)?;
    let name = name.name;
    tracing::info!(%actor, operator = %name, role = role.as_str(), "operator added");
    let after = Some(serde_json::json!({ "name": name, "role": role.as_str() }));
    let record = Record { actor: actor.name(), action: "add_operator", voucher_id: None, before: None, after };
    audit::record(&state.backend.db, record).await;
    Ok(Operator { name, role })
}
crate::error::refuses!(AddOperator: NameTaken);

/// The operator running this browser's admin page (`token` for the admin token);
/// `operator` is `null` for nobody.
#[server(prefix = "/api", endpoint = "operator_me", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn operator_me() -> AppResult<CurrentOperator> {
    Ok(CurrentOperator { operator: current_operator().map(|a| Operator { name: a.name().to_owned(), role: a.role() }) })
}
crate::error::refuses!(OperatorMe:);

/// True when this browser holds an operator cookie (or the call carries the token).
#[server(prefix = "/api", endpoint = "admin_status", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn admin_status() -> AppResult<bool> {
    Ok(current_operator().is_some())
}
crate::error::refuses!(AdminStatus:);
