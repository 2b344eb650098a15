//! Shoppers' account endpoints: `/api/sign_up`, `/api/sign_up_challenge`,
//! `/api/sign_in`, `/api/change_password`, `/api/sign_out` (which ends this browser's
//! operator session too), `/api/sign_out_everywhere`, `/api/me`; and the one way a
//! password is checked, shoppers' and operators' alike ([`check`]). The operators'
//! own endpoints are in `operator_api`.

use super::{
    challenge::{NextChallenge, Solution},
    CurrentUser, User,
};
use crate::error::AppResult;
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {
    super::{
        attempts::{self, Target},
        caller::{current_operator, current_session, set_cookie},
        challenge,
        context::Context,
        names, operators, password,
        session::{Actor, Session, SESSION_SECS},
        store,
    },
    crate::{
        client_ip::ClientIp,
        error::{AppError, ErrorCode},
    },
};

/// Makes an account (name and password) and signs it in. A name somebody has, or one
/// that passes for it (another case or width, look-alike letters, spaces doubled),
/// answers `name_taken`; a name with a character nobody sees (zero-width, a direction
/// mark), or a password shorter than 8 or longer than 128 characters or among the
/// commonest, answers `invalid_input`. With the challenge on (the default), it
/// carries a solved `sign_up_challenge` (`challenge_required` otherwise, with a fresh
/// one); past the address's quota it answers `rate_limited`; with sign-ups off,
/// `sign_up_closed`.
#[server(prefix = "/api", endpoint = "sign_up", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn sign_up(name: String, password: String, challenge: Option<Solution>) -> AppResult<User> {
    let state = Context::get();
    if !state.sign_ups.open {
        return Err(ErrorCode::SignUpClosed.into());
    }
    let name = names::new_name(&name)?;
    password::check_new("password", &password)?;
    let now = chrono::Utc::now().timestamp();
    let backend = &state.backend;
    let taken = match &state.sign_ups.challenges {
        Some(challenges) => Some(solved(&state, challenges, challenge.as_ref(), now).await?),
        None => None,
    };
    // Each challenge is solved for one try (a name taken included: one solution does
    // not ask about many names). Taken before the quota counts the try: a solution
    // sent again counts nothing, or one solution replayed would spend an address's
    // quota (a carrier's NAT: everybody behind it) for the hour.
    if let Some((solution, expires)) = taken {
        if !challenge::take_once(backend, solution, expires, now).await? {
            return Err(challenge_required(&state, "it was used already").await);
        }
    }
    if let Some(wait) = challenge::over_quota(backend, client_address(), state.sign_ups.quota, now).await? {
        return Err(AppError::rate_limited(wait));
    }
    // A taken name costs no hash.
    if names::taken(&backend.db, "users", &name).await? {
        return Err(names::taken_refusal());
    }
    let hash = state.hasher.hash_new_account(password).await?;
    let user_id = store::create(&backend.db, &name, &hash).await?.ok_or_else(names::taken_refusal)?;
    let name = name.name;
    if let Err(e) = challenge::note_sign_up(backend, now).await {
        tracing::warn!("counting a sign-up: {e}");
    }
    tracing::info!(user_id, "account created");
    set_cookie(&state.secrets.session_cookie(user_id, &name, 0))?;
    set_cookie(&attempts::known_browser(&state.secrets, &Target::Account(&name)))?;
    Ok(User { user_id, name })
}
crate::error::refuses!(SignUp: SignUpClosed, ChallengeRequired, NameTaken);

/// A challenge for the next sign-up (see `auth::challenge`): `challenge` is `null` when
/// none is asked here; `sign_up_closed` with sign-ups off.
#[server(prefix = "/api", endpoint = "sign_up_challenge", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn sign_up_challenge() -> AppResult<NextChallenge> {
    let state = Context::get();
    if !state.sign_ups.open {
        return Err(ErrorCode::SignUpClosed.into());
    }
    let challenge = match &state.sign_ups.challenges {
        Some(challenges) => Some(fresh_challenge(&state, challenges).await?),
        None => None,
    };
    Ok(NextChallenge { challenge })
}
crate::error::refuses!(SignUpChallenge: SignUpClosed);

/// A challenge of the work the recent sign-up rate asks.
#[cfg(feature = "ssr")]
async fn fresh_challenge(state: &Context, challenges: &challenge::Challenges) -> AppResult<challenge::Challenge> {
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
    let forms = names::signed_in_as(&name)?;
    let state = Context::get();
    let target = Target::Account(&forms[0]);
    let account = check_password(&state, &target, &forms, ("password", password)).await?;
    set_cookie(&state.secrets.session_cookie(account.user_id, &account.name, account.generation))?;
    set_cookie(&attempts::known_browser(&state.secrets, &target))?;
    Ok(User { user_id: account.user_id, name: account.name })
}
crate::error::refuses!(SignIn: BadCredentials);

/// Changes the signed-in shopper's password (the current one is asked again) and ends
/// every other session of the account; this browser gets a new session.
#[server(prefix = "/api", endpoint = "change_password", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn change_password(current: String, new: String) -> AppResult<()> {
    let state = Context::get();
    let session = signed_in(&state)?;
    password::check_new("new", &new)?;
    let named = std::slice::from_ref(&session.name);
    check_password(&state, &Target::Account(&session.name), named, ("current", current)).await?;
    let hash = state.hasher.hash(new).await?;
    let ended = store::end_all_sessions(&state.backend.db, session.user_id, Some(&hash), SESSION_SECS * 1000).await?;
    state.secrets.ended.apply(std::slice::from_ref(&ended));
    tracing::info!(user_id = session.user_id, "password changed; other sessions ended");
    let generation = ended.generation.unwrap_or_default();
    set_cookie(&state.secrets.session_cookie(session.user_id, &session.name, generation))
}
crate::error::refuses!(ChangePassword: BadCredentials);

/// Ends this session (its cookie stops working on every process, even if copied) and
/// the operator session of this browser: an operator's cookies end for good, on
/// every process within a second (they sign in again wherever else they were). A
/// process that cannot read the database lately answers `unavailable`, ending
/// nothing: try again.
#[server(prefix = "/api", endpoint = "sign_out", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn sign_out() -> AppResult<()> {
    let state = Context::get();
    // A copy too old to tell this browser's cookies by (the database unread here for
    // a while) would take them for ended already, write nothing, and answer "signed
    // out" while a copy of a cookie goes on working elsewhere: try again instead.
    if state.secrets.ended.is_stale() || state.secrets.operators.is_stale() {
        return Err(ErrorCode::Unavailable.into());
    }
    if let Some(session) = current_session(&state.secrets) {
        let expires_ms = session.expires * 1000;
        let db = &state.backend.db;
        let ended = store::end_session(db, session.user_id, &session.id, expires_ms, SESSION_SECS * 1000).await?;
        state.secrets.ended.apply(&[ended]);
    }
    if let Some(actor) = current_operator() {
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
crate::error::refuses!(SignOut:);

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
crate::error::refuses!(SignOutEverywhere:);

/// The signed-in shopper: `user` is `null` for nobody (with the shop's own login, the
/// token's `sub` is the name).
#[server(prefix = "/api", endpoint = "me", input = Json, input_derive = (Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema))]
pub async fn me() -> AppResult<CurrentUser> {
    signed_in_user().await.map(|user| CurrentUser { user })
}
crate::error::refuses!(Me:);

/// The shopper `me` names, if any.
#[cfg(feature = "ssr")]
async fn signed_in_user() -> AppResult<Option<User>> {
    let state = Context::get();
    if let Some(s) = current_session(&state.secrets) {
        return Ok(Some(User { user_id: s.user_id, name: s.name }));
    }
    let (Some(login), Some(parts)) = (&state.shop_login, use_context::<axum::http::request::Parts>()) else {
        return Ok(None);
    };
    let Some(subject) = login.subject_of(&parts.extensions, &parts.headers) else { return Ok(None) };
    let user_id = login.shopper(&state.backend.db, &parts.extensions, &parts.headers).await.transpose()?;
    Ok(user_id.map(|user_id| User { user_id, name: subject.to_string() }))
}

/// The session of the caller, or `not_signed_in`.
#[cfg(feature = "ssr")]
fn signed_in(state: &Context) -> AppResult<Session> {
    current_session(&state.secrets).ok_or_else(|| ErrorCode::NotSignedIn.into())
}

/// The caller's address as the server trusts it (see `server::rate_limit`).
#[cfg(feature = "ssr")]
pub(super) fn client_address() -> std::net::IpAddr {
    let parts = use_context::<axum::http::request::Parts>();
    let client = parts.and_then(|p| p.extensions.get::<ClientIp>().copied());
    client.map_or(std::net::Ipv4Addr::UNSPECIFIED.into(), |c| c.0)
}

/// Checks `password` (sent as its field) against a shopper's account, counted against
/// `target` and the caller's address: the account's credentials, or `bad_credentials`.
#[cfg(feature = "ssr")]
async fn check_password(
    state: &Context,
    target: &Target<'_>,
    forms: &[String],
    password: (&str, String),
) -> AppResult<store::Credentials> {
    check(state, target, password, async {
        let db = &state.backend.db;
        let account = names::first_found(forms, |name| async move { store::by_name(db, &name).await }).await?;
        Ok(account.map(|a| (a.password_hash.clone(), a)))
    })
    .await
}

/// The one way a password is checked, shoppers' and operators' alike: a place in the
/// hash pool first (a busy server never uses up anyone's attempts; a check at an
/// account signed in to often lately, `attempts::often`, takes one of the half of the
/// pool such checks share), the check counted from its source (a browser known to the
/// account, or the address), the account looked up (`find`: its hash, if it has one,
/// and what to hand back), the check counted at the name's counter (somebody's or
/// nobody's alike), the hash verified (a decoy when there is none: an unknown name gets
/// the same answer in the same time), and how it ended counted. `password` comes with
/// the field it was sent in, which a refusal names. A sign-in that it lets through
/// makes the browser known to the account (`attempts::known_browser`), after its own
/// cookie: clients that keep the first cookie keep the credential.
#[cfg(feature = "ssr")]
pub(super) async fn check<T>(
    state: &Context,
    target: &Target<'_>,
    (field, password): (&str, String),
    find: impl std::future::Future<Output = AppResult<Option<(Option<String>, T)>>>,
) -> AppResult<T> {
    if password.chars().count() > password::MAX_CHARS {
        return Err(AppError::invalid(format!("A password has at most {} characters.", password::MAX_CHARS)).on(field));
    }
    let headers = use_context::<axum::http::request::Parts>().map(|p| p.headers).unwrap_or_default();
    let address = client_address();
    let source = attempts::Source::of(&state.secrets, &headers, target, address);
    let key = &state.secrets.attempts_key;
    let frequent = attempts::often(&state.backend, key, target).await?;
    let admission = state.hasher.admit(source.asker(address), frequent)?;
    // The source first: a guesser who must wait costs no database read.
    attempts::may_try(&state.backend, &source).await?;
    let (hash, found) = find.await?.map_or((None, None), |(hash, found)| (hash, Some(found)));
    let attempt = attempts::begin(&state.backend, key, target, &source).await?;
    // Bounded, so the check's place is never held past its bound (dropped, the
    // attempt gives it back). The hash holds the attempt while it runs: a caller that
    // goes away mid-hash leaves its place taken until the hash is done, so one
    // address never has more hashes going than its places.
    let verified =
        tokio::time::timeout(attempts::CHECK_BOUND, state.hasher.verify(admission, password, hash, attempt)).await;
    let (matches, attempt) = verified.map_err(|_| AppError::from(ErrorCode::Unavailable))??;
    match found {
        Some(found) if matches => {
            attempt.succeeded().await?;
            if let Err(e) = attempts::signed_in(&state.backend, key, target).await {
                tracing::warn!("counting a right password: {e}");
            }
            Ok(found)
        }
        _ => {
            attempt.failed().await?;
            Err(ErrorCode::BadCredentials.into())
        }
    }
}
