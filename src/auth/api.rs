//! Account endpoints: `/api/sign_up`, `/api/sign_in`, `/api/change_password`,
//! `/api/sign_out`, `/api/sign_out_everywhere`, `/api/me`; the operators' own:
//! `/api/operator_sign_in`, `/api/admin_sign_in` (the token), `/api/add_operator`,
//! `/api/list_operators`, `/api/remove_operator`, `/api/set_operator_role`,
//! `/api/change_operator_password`, `/api/operator_me`, `/api/admin_status`.

use super::{
    challenge::{Challenge, Solution},
    ListedOperator, Operator, Role, User,
};
use crate::error::AppResult;
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    super::{
        attempts::{self, Target},
        caller::{current_session, require_admin_role, require_operator, set_cookie},
        challenge,
        context::Context,
        jwt, operators, password,
        session::{Actor, Session, SESSION_SECS},
        store, validate_name,
    },
    crate::{
        audit::store::{self as audit, Record},
        client_ip::ClientIp,
        error::{AppError, ErrorCode},
    },
};

/// Makes an account (name and password) and signs it in. A name somebody has answers
/// `name_taken`; a password shorter than 8 or longer than 128 characters, or among
/// the commonest, answers `invalid_input`. With the challenge on (the default), it
/// carries a solved `sign_up_challenge` (`challenge_required` otherwise, with a fresh
/// one); past the address's quota it answers `rate_limited`; with sign-ups off,
/// `sign_up_closed`.
#[server(prefix = "/api", endpoint = "sign_up", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn sign_up(name: String, password: String, challenge: Option<Solution>) -> AppResult<User> {
    let state = Context::get();
    if !state.sign_ups.open {
        return Err(ErrorCode::SignUpClosed.into());
    }
    let name = validate_name(&name)?;
    password::check_new(&password)?;
    let now = chrono::Utc::now().timestamp();
    let backend = &state.backend;
    let taken = match &state.sign_ups.challenges {
        Some(challenges) => Some(solved(&state, challenges, challenge.as_ref(), now).await?),
        None => None,
    };
    if let Some(wait) = challenge::over_quota(backend, client_address(), state.sign_ups.quota, now).await? {
        return Err(AppError::rate_limited(wait));
    }
    // Each challenge is solved for one try (a name taken included: one solution does
    // not ask about many names).
    if let Some((solution, expires)) = taken {
        if !challenge::take_once(backend, solution, expires, now).await? {
            return Err(challenge_required(&state, "it was used already").await);
        }
    }
    // A taken name costs no hash.
    if store::by_name(&backend.db, &name).await?.is_some() {
        return Err(ErrorCode::NameTaken.into());
    }
    let hash = state.hasher.hash_new_account(password).await?;
    let user_id = store::create(&backend.db, &name, &hash).await?.ok_or(ErrorCode::NameTaken)?;
    if let Err(e) = challenge::note_sign_up(backend, now).await {
        tracing::warn!("counting a sign-up: {e}");
    }
    tracing::info!(user_id, "account created");
    set_cookie(&state.secrets.session_cookie(user_id, &name, 0))?;
    set_cookie(&attempts::known_browser(&state.secrets, &Target::Account(&name)))?;
    Ok(User { user_id, name })
}

/// A challenge for the next sign-up (see `auth::challenge`), or `null` when none is
/// asked here; `sign_up_closed` with sign-ups off.
#[server(prefix = "/api", endpoint = "sign_up_challenge", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn sign_up_challenge() -> AppResult<Option<Challenge>> {
    let state = Context::get();
    if !state.sign_ups.open {
        return Err(ErrorCode::SignUpClosed.into());
    }
    match &state.sign_ups.challenges {
        Some(challenges) => Ok(Some(fresh_challenge(&state, challenges).await?)),
        None => Ok(None),
    }
}

/// A challenge of the work the recent sign-up rate asks.
#[cfg(feature = "ssr")]
async fn fresh_challenge(state: &Context, challenges: &challenge::Challenges) -> AppResult<Challenge> {
    let now = chrono::Utc::now().timestamp();
    Ok(challenges.issue(challenge::maxnumber(&state.backend, now).await?, now))
}

/// The solution `sign_up` carries, checked (and its expiry), or `challenge_required`.
#[cfg(feature = "ssr")]
async fn solved<'a>(
    state: &Context,
    challenges: &challenge::Challenges,
    solution: Option<&'a Solution>,
    now: i64,
) -> AppResult<(&'a Solution, i64)> {
    let Some(solution) = solution else { return Err(challenge_required(state, "none was sent").await) };
    let issued = match challenges.check(solution, now) {
        Ok(issued) => issued,
        Err(why) => return Err(challenge_required(state, why).await),
    };
    // The work is the one asked when it is spent: challenges stockpiled while they were
    // cheap are worth nothing in a burst.
    if issued.maxnumber < challenge::maxnumber(&state.backend, now).await? {
        return Err(challenge_required(state, "the work asked has risen since it was handed out").await);
    }
    Ok((solution, issued.expires))
}

/// `challenge_required`, with a fresh challenge in its header.
#[cfg(feature = "ssr")]
async fn challenge_required(state: &Context, why: &str) -> AppError {
    let Some(challenges) = &state.sign_ups.challenges else { return ErrorCode::ChallengeRequired.into() };
    match fresh_challenge(state, challenges).await {
        Ok(fresh) => challenge::required(why, &fresh),
        Err(e) => e,
    }
}

/// Signs in with a name and a password and sets the session cookie. A wrong name or
/// password answers `bad_credentials` (the same answer, in the same time, whether the
/// name exists or not); too many attempts answer `rate_limited` with `Retry-After`.
#[server(prefix = "/api", endpoint = "sign_in", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn sign_in(name: String, password: String) -> AppResult<User> {
    let name = validate_name(&name)?;
    let state = Context::get();
    let target = Target::Account(&name);
    let account = check_password(&state, &target, &name, password).await?;
    set_cookie(&state.secrets.session_cookie(account.user_id, &account.name, account.generation))?;
    set_cookie(&attempts::known_browser(&state.secrets, &target))?;
    Ok(User { user_id: account.user_id, name: account.name })
}

/// Changes the signed-in shopper's password (the current one is asked again) and ends
/// every other session of the account; this browser gets a new session.
#[server(prefix = "/api", endpoint = "change_password", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn change_password(current: String, new: String) -> AppResult<()> {
    let state = Context::get();
    let session = signed_in(&state)?;
    password::check_new(&new)?;
    check_password(&state, &Target::Account(&session.name), &session.name, current).await?;
    let hash = state.hasher.hash(new).await?;
    let ended = store::end_all_sessions(&state.backend.db, session.user_id, Some(&hash), SESSION_SECS * 1000).await?;
    state.secrets.ended.apply(std::slice::from_ref(&ended));
    tracing::info!(user_id = session.user_id, "password changed; other sessions ended");
    let generation = ended.generation.unwrap_or_default();
    set_cookie(&state.secrets.session_cookie(session.user_id, &session.name, generation))
}

/// Ends this session (its cookie stops working on every process, even if copied) and
/// the operator session of this browser: an operator's cookies end for good, on
/// every process within a second (they sign in again wherever else they were).
#[server(prefix = "/api", endpoint = "sign_out", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn sign_out() -> AppResult<()> {
    let state = Context::get();
    if let Some(session) = current_session(&state.secrets) {
        let expires_ms = session.expires * 1000;
        let db = &state.backend.db;
        let ended = store::end_session(db, session.user_id, &session.id, expires_ms, SESSION_SECS * 1000).await?;
        state.secrets.ended.apply(&[ended]);
    }
    if let Ok(actor) = require_operator() {
        match actor {
            Actor::Operator { id, .. } => drop(operators::end_sessions(&state.backend.db, id, None).await?),
            // Every cookie the token bought ends: none carries the token to tell them apart.
            Actor::Token => drop(operators::end_token_sessions(&state.backend.db).await?),
        }
        state.secrets.operators.catch_up(&state.backend.db).await?;
        tracing::info!(%actor, "operator signed out");
    }
    state.secrets.clearing_cookies().iter().try_for_each(|c| set_cookie(c))
}

/// Ends every session of the signed-in shopper, on every device and process.
#[server(prefix = "/api", endpoint = "sign_out_everywhere", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn sign_out_everywhere() -> AppResult<()> {
    let state = Context::get();
    let session = signed_in(&state)?;
    let ended = store::end_all_sessions(&state.backend.db, session.user_id, None, SESSION_SECS * 1000).await?;
    state.secrets.ended.apply(&[ended]);
    tracing::info!(user_id = session.user_id, "signed out everywhere");
    state.secrets.clearing_cookies().iter().try_for_each(|c| set_cookie(c))
}

/// The signed-in shopper, if any (with the shop's own login, the token's `sub` is the
/// name).
#[server(prefix = "/api", endpoint = "me", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn me() -> AppResult<Option<User>> {
    let state = Context::get();
    if let Some(s) = current_session(&state.secrets) {
        return Ok(Some(User { user_id: s.user_id, name: s.name }));
    }
    let (Some(login), Some(parts)) = (&state.shop_login, use_context::<axum::http::request::Parts>()) else {
        return Ok(None);
    };
    let Some(subject) = jwt::bearer_jwt(&parts.headers).and_then(|t| login.subject(t)) else { return Ok(None) };
    let user_id = login.shopper(&state.backend.db, &parts.headers).await.transpose()?;
    Ok(user_id.map(|user_id| User { user_id, name: subject }))
}

/// Checks the admin token and, if right, sets the operator cookie for the admin page.
/// Guesses are limited like passwords.
#[server(prefix = "/api", endpoint = "admin_sign_in", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn admin_sign_in(token: String) -> AppResult<()> {
    let state = Context::get();
    let right = state.secrets.token_matches(token.trim());
    attempts::admin_token(&state.backend, client_address(), right).await?;
    if !right {
        return Err(ErrorCode::AdminRequired.into());
    }
    // The cookie names the token's generation as it is now.
    state.secrets.operators.catch_up(&state.backend.db).await?;
    set_cookie(&state.secrets.operator_cookie(&Actor::Token))
}

/// Signs an operator in by name and password and sets the operator cookie, which names
/// them. Wrong name or password: `bad_credentials`; guesses are limited as shoppers'.
#[server(prefix = "/api", endpoint = "operator_sign_in", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn operator_sign_in(name: String, password: String) -> AppResult<Operator> {
    let name = validate_name(&name)?;
    let state = Context::get();
    let operator = check(&state, &Target::Operator(&name), password, async {
        let operator = operators::by_name(&state.backend.db, &name).await?;
        Ok(operator.map(|o| (Some(o.password_hash.clone()), o)))
    })
    .await?;
    let (id, generation) = (operator.id, operator.generation);
    let actor = Actor::Operator { id, name: operator.name.clone(), role: operator.role, generation };
    operators::signed_in(&state.backend.db, id).await?;
    // This process knows them from their first call, whichever process added them.
    state.secrets.operators.catch_up(&state.backend.db).await?;
    set_cookie(&state.secrets.operator_cookie(&actor))?;
    set_cookie(&attempts::known_browser(&state.secrets, &Target::Operator(&name)))?;
    tracing::info!(%actor, "operator signed in");
    Ok(Operator { name: operator.name, role: operator.role })
}

/// Every operator with their role and last sign-in (admins only).
#[server(prefix = "/api", endpoint = "list_operators", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn list_operators() -> AppResult<Vec<ListedOperator>> {
    let state = Context::get();
    require_admin_role()?;
    Ok(operators::list(&state.backend.db).await?)
}

/// Removes an operator (admins only): from when this answers, their cookies are refused
/// on every process within a second. The last admin cannot be removed (`last_admin`);
/// an unknown name answers `unknown_operator`.
#[server(prefix = "/api", endpoint = "remove_operator", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn remove_operator(name: String) -> AppResult<()> {
    let state = Context::get();
    let actor = require_admin_role()?;
    let name = validate_name(&name)?;
    let before = operators::remove(&state.backend.db, &name).await??;
    state.secrets.operators.catch_up(&state.backend.db).await?;
    tracing::info!(%actor, operator = %name, "operator removed");
    let before = Some(serde_json::json!({ "name": name, "role": before.as_str() }));
    let record = Record { actor: actor.name(), action: "remove_operator", voucher_id: None, before, after: None };
    audit::record(&state.backend.db, record).await;
    Ok(())
}

/// Gives an operator another role (admins only): their next call on every process,
/// within a second, has the new one. The last admin cannot be demoted (`last_admin`).
#[server(prefix = "/api", endpoint = "set_operator_role", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn set_operator_role(name: String, role: Role) -> AppResult<Operator> {
    let state = Context::get();
    let actor = require_admin_role()?;
    let name = validate_name(&name)?;
    let before = operators::set_role(&state.backend.db, &name, role).await??;
    state.secrets.operators.catch_up(&state.backend.db).await?;
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

/// Changes the signed-in operator's own password (the current one is asked again) and
/// ends their other operator cookies; this browser gets a new one.
#[server(prefix = "/api", endpoint = "change_operator_password", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn change_operator_password(current: String, new: String) -> AppResult<()> {
    let state = Context::get();
    let Actor::Operator { id, name, role, .. } = require_operator()? else {
        return Err(AppError::invalid("The admin token has no password to change."));
    };
    password::check_new(&new)?;
    check(&state, &Target::Operator(&name), current, async {
        let operator = operators::by_name(&state.backend.db, &name).await?;
        Ok(operator.filter(|o| o.id == id).map(|o| (Some(o.password_hash.clone()), ())))
    })
    .await?;
    let hash = state.hasher.hash(new).await?;
    let generation = operators::end_sessions(&state.backend.db, id, Some(&hash)).await?;
    state.secrets.operators.catch_up(&state.backend.db).await?;
    let actor = Actor::Operator { id, name, role, generation };
    tracing::info!(%actor, "operator's password changed; other operator cookies ended");
    let record =
        Record { actor: actor.name(), action: "change_operator_password", voucher_id: None, before: None, after: None };
    audit::record(&state.backend.db, record).await;
    set_cookie(&state.secrets.operator_cookie(&actor))
}

/// Adds an operator (admins only): a name (1–32 characters), a password (as a
/// shopper's) and a role, `operator` or `admin`. A name taken answers `name_taken`.
#[server(prefix = "/api", endpoint = "add_operator", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn add_operator(name: String, password: String, role: Role) -> AppResult<Operator> {
    let state = Context::get();
    let actor = require_admin_role()?;
    let name = validate_name(&name)?;
    operators::check_not_reserved(&name)?;
    password::check_new(&password)?;
    if operators::by_name(&state.backend.db, &name).await?.is_some() {
        return Err(ErrorCode::NameTaken.into());
    }
    let hash = state.hasher.hash(password).await?;
    operators::create(&state.backend.db, &name, &hash, role).await?.ok_or(ErrorCode::NameTaken)?;
    tracing::info!(%actor, operator = %name, role = role.as_str(), "operator added");
    let after = Some(serde_json::json!({ "name": name, "role": role.as_str() }));
    let record = Record { actor: actor.name(), action: "add_operator", voucher_id: None, before: None, after };
    audit::record(&state.backend.db, record).await;
    Ok(Operator { name, role })
}

/// The operator running this browser's admin page (`token` for the admin token), or
/// `null`.
#[server(prefix = "/api", endpoint = "operator_me", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn operator_me() -> AppResult<Option<Operator>> {
    Ok(require_operator().ok().map(|a| Operator { name: a.name().to_owned(), role: a.role() }))
}

/// True when this browser holds an operator cookie (or the call carries the token).
#[server(prefix = "/api", endpoint = "admin_status", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn admin_status() -> AppResult<bool> {
    Ok(require_operator().is_ok())
}

/// The session of the caller, or `not_signed_in`.
#[cfg(feature = "ssr")]
fn signed_in(state: &Context) -> AppResult<Session> {
    current_session(&state.secrets).ok_or_else(|| ErrorCode::NotSignedIn.into())
}

/// The caller's address as the server trusts it (see `server::rate_limit`).
#[cfg(feature = "ssr")]
fn client_address() -> std::net::IpAddr {
    let parts = use_context::<axum::http::request::Parts>();
    let client = parts.and_then(|p| p.extensions.get::<ClientIp>().copied());
    client.map_or(std::net::Ipv4Addr::UNSPECIFIED.into(), |c| c.0)
}

/// Checks `password` against a shopper's account, counted against `target` and the
/// caller's address: the account's credentials, or `bad_credentials`.
#[cfg(feature = "ssr")]
async fn check_password(
    state: &Context,
    target: &Target<'_>,
    name: &str,
    password: String,
) -> AppResult<store::Credentials> {
    check(state, target, password, async {
        let account = store::by_name(&state.backend.db, name).await?;
        Ok(account.map(|a| (a.password_hash.clone(), a)))
    })
    .await
}

/// The one way a password is checked, shoppers' and operators' alike: a place in the
/// hash pool first (a busy server never uses up anyone's attempts), the check counted
/// from its source (a browser known to the account, or the address), the account
/// looked up (`find`: its hash, if it has one, and what to hand back), the check
/// counted at the name's counter (somebody's or nobody's alike), the hash verified (a
/// decoy when there is none: an unknown name gets the same answer in the same time),
/// and how it ended counted. A sign-in that it lets through makes the browser known to
/// the account (`attempts::known_browser`), after its own cookie: clients that keep the
/// first cookie keep the credential.
#[cfg(feature = "ssr")]
async fn check<T>(
    state: &Context,
    target: &Target<'_>,
    password: String,
    find: impl std::future::Future<Output = AppResult<Option<(Option<String>, T)>>>,
) -> AppResult<T> {
    if password.chars().count() > password::MAX_CHARS {
        return Err(AppError::invalid(format!("A password has at most {} characters.", password::MAX_CHARS)));
    }
    let headers = use_context::<axum::http::request::Parts>().map(|p| p.headers).unwrap_or_default();
    let source = attempts::Source::of(&state.secrets, &headers, target, client_address());
    let admission = state.hasher.admit()?;
    // The source first: a guesser who must wait costs no database read.
    attempts::may_try(&state.backend, &source).await?;
    let (hash, found) = find.await?.map_or((None, None), |(hash, found)| (hash, Some(found)));
    let attempt = attempts::begin(&state.backend, &state.secrets.attempts_key, target, &source).await?;
    // Bounded, so the check's place is never held past its bound (dropped, the
    // attempt gives it back).
    let verified = tokio::time::timeout(attempts::CHECK_BOUND, state.hasher.verify(admission, password, hash)).await;
    let matches = verified.map_err(|_| AppError::from(ErrorCode::Unavailable))??;
    match found {
        Some(found) if matches => {
            attempt.succeeded().await?;
            Ok(found)
        }
        _ => {
            attempt.failed().await?;
            Err(ErrorCode::BadCredentials.into())
        }
    }
}
