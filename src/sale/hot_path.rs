//! `/api/grab` and `/api/grab_result` served as plain axum handlers. In a storm every
//! shopper calls these, and the server-function layer's own cost per call (a reactive
//! owner, contexts, a copy of the request's headers, a 500 rewritten to its real status
//! from the body) weighed more than the grab. The server functions in `api.rs` stay the
//! API: same paths, same JSON in and out, same errors; the UI calls them as before and
//! lands here. Over HTTP only these handlers answer; the server functions' bodies run
//! only when called in-process. Both run `grab.rs`, so neither can drift.

use super::{
    api::{Grab, GrabResult},
    context::Context,
};
use crate::{
    auth::{caller::shopper, context::Context as Accounts},
    body::read_capped,
    error::{invalid_body, AppResult, ErrorCode},
};
use axum::{
    body::Body,
    extract::{FromRef, Request, State},
    http::{header, HeaderValue},
    response::{IntoResponse, Response},
    routing::post,
    Json, Router,
};
use serde::{de::DeserializeOwned, Serialize};
use server_fn::ServerFn;
use std::sync::Arc;

/// Arguments are a few dozen bytes; a larger body is refused.
pub(crate) const MAX_ARGS_BYTES: usize = 4 * 1024;

/// The paths these routes take over from the server-function layer: what every shopper
/// calls in a storm. The rest of the server reads this one list: the server-function
/// layer leaves them out ([`paths`]), and the front door neither reads their bodies
/// first nor lets a caller over its rate call them ([`is_own`]).
const PATHS: [&str; 2] = [Grab::PATH, GrabResult::PATH];

/// [`PATHS`], for the server-function layer to leave out.
pub fn paths() -> Vec<String> {
    PATHS.map(str::to_owned).to_vec()
}

/// Whether `path` is one of these routes, which read their bodies with a cap of their
/// own (the front door need not read them first) and are rate limited.
pub fn is_own(path: &str) -> bool {
    PATHS.contains(&path)
}

/// The routes, for the app's router (inside its request cap and timeout).
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<Context>: FromRef<S>,
    Arc<Accounts>: FromRef<S>,
{
    Router::new().route(Grab::PATH, post(grab)).route(GrabResult::PATH, post(grab_result))
}

/// Put on a grab by the front door when it carries an `Idempotency-Key` it serves
/// (`server::idempotency`). A keyed grab that reaches its handler is a first try, or
/// the retry of one whose answer was never kept (a replay is answered before): it is
/// asked of the gate, as one sent `again` is, so a buyer hears their order, not the
/// process's sold-out flag (a failover drill, 2026-11-30).
#[derive(Clone, Copy, Debug)]
pub struct Keyed;

/// `POST /api/grab`: see `api::grab`.
async fn grab(State(state): State<Arc<Context>>, State(accounts): State<Arc<Accounts>>, request: Request) -> Response {
    let (head, body) = request.into_parts();
    let call = async {
        let args: Grab = arguments(body).await?;
        let user_id = shopper::<Grab>(&accounts, &head).await?;
        let keyed = head.extensions.get::<Keyed>().is_some();
        let asked = (args.token.as_deref(), args.again.unwrap_or(false) || keyed);
        super::grab::grab(&state, user_id, args.voucher_id, asked).await
    };
    answer(call.await)
}

/// `POST /api/grab_result`: see `api::grab_result`.
async fn grab_result(
    State(state): State<Arc<Context>>,
    State(accounts): State<Arc<Accounts>>,
    request: Request,
) -> Response {
    let (head, body) = request.into_parts();
    let call = async {
        let args: GrabResult = arguments(body).await?;
        let user_id = shopper::<GrabResult>(&accounts, &head).await?;
        super::grab::grab_result(&state, user_id, args.voucher_id, &args.order_id, args.receipt.as_deref()).await
    };
    answer(call.await)
}

/// The call's JSON arguments, refused the way the server-function layer refuses them.
async fn arguments<T: DeserializeOwned>(body: Body) -> AppResult<T> {
    let bytes = read_capped(body, MAX_ARGS_BYTES).await?;
    crate::body::check_object(&bytes)?;
    serde_json::from_slice(&bytes)
        .map_err(|e| crate::body::fault::<T>(&bytes).unwrap_or_else(|| invalid_body(&e.to_string())))
}

/// The answer as the server functions give it: the value as JSON, or the error's JSON
/// with the status its code calls for. `unavailable` (shed, or Redis not answering)
/// says when to try again: a second, which the page spreads with jitter.
fn answer<T: Serialize>(result: AppResult<T>) -> Response {
    match result {
        Ok(value) => Json(value).into_response(),
        Err(e) if e.code == ErrorCode::Unavailable => {
            let mut response = e.into_response();
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(1));
            response
        }
        Err(e) => e.into_response(),
    }
}
