//! The front door: [`front`], the one middleware every request passes. It times and
//! counts the request ([`monitoring`]), names the caller and holds back one over its rate
//! ([`rate_limit`]), serves at most so many requests at once (more answer 503
//! `unavailable` at once; one address or IPv6 /48 past its share of them, 429:
//! [`in_flight`]) and each within the request timeout (then 503), and for
//! `/api/...` calls applies the API's own rules:
//! - a route of the access table ([`access`]) goes on only for the callers its entry
//!   admits, and its handler is handed the caller found; an `/api/...` route it does
//!   not list is refused;
//! - a bearer that does not verify, where a bearer is accepted (`/metrics` and the live
//!   feed included), is a guess at the admin token, counted as passwords' are
//!   (`auth::attempts`); the right one is never held back;
//! - a state-changing call must carry JSON and come from this site, so a cross-site
//!   form (which can send `text/plain` or a form body, with the shopper's cookies) can
//!   neither grab, nor sign anyone in or out, nor act as an operator;
//! - a call's body is read here first, up to 64 KB ([`crate::body`]): the
//!   server-function layer would read one of any size whole;
//! - a refusal gets the HTTP status its error code calls for, and a wrong method the
//!   JSON error shape;
//! - [`not_found`]: an unknown path answers the JSON error shape too.
//!
//! The shop page is served from one shared render ([`PageCache`]).
//!
//! One layer, not one per concern: each layer costs every request a boxed future and
//! a clone of the router behind it, and a storm is nothing but requests. (The cap and
//! the timeout were tower's load-shed, concurrency-limit, timeout and error-handling
//! layers: folded in here, the server runs fewer instructions per grab; `src/bin/bench/history.md`.)

use super::{
    access::{self, Access},
    idempotency,
    in_flight::{self, InFlight},
    monitoring,
    page_cache::PageCache,
    rate_limit::{self, Limits},
    site,
};
use crate::{
    auth::{
        attempts,
        caller::{self, Caller, SessionChecked},
        jwt::{ShopLogin, SubjectChecked},
        session::Actor,
        Role, Secrets,
    },
    backend::Backend,
    body::{check_object, read_capped},
    client_ip::ClientIp,
    error::{AppError, ErrorCode},
    report::{tally::Tally, Outcome},
    sale,
};
use axum::{
    body::{to_bytes, Body, Bytes},
    extract::{ConnectInfo, Request, State},
    http::{header, HeaderMap, Method, StatusCode, Uri},
    middleware::Next,
    response::{IntoResponse, Response},
};
use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
    time::{Duration, Instant},
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Error bodies are small; anything larger is not ours and is passed on untouched.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// The largest body an `/api/...` call may send: the longest arguments (a voucher's
/// fields) take a few hundred bytes.
const MAX_API_BODY: usize = 64 * 1024;

/// A refusal in the API's shape, with its status.
pub fn refusal(refused: impl Into<AppError>) -> Response {
    refused.into().into_response()
}

/// What the front door holds.
pub struct Guard {
    limits: Arc<Limits>,
    /// One permit per request being served.
    slots: Arc<Semaphore>,
    /// Each caller's share of them (none with the per-address rate limit off).
    shares: Option<Arc<InFlight>>,
    timeout: Duration,
    /// The shop page every visitor shares.
    shop_page: PageCache,
    /// Where guesses at the admin token are counted, and what knows the token.
    backend: Backend,
    /// Where grabs refused over their rate are counted for the sale's report.
    tally: Arc<Tally>,
    secrets: Arc<Secrets>,
    /// The shop's own login, when on: bearer tokens of the JWT form are shoppers'.
    shop_login: Option<Arc<ShopLogin>>,
    /// Where the site's files are (`/pkg/`), for how long they may be kept.
    pkg_route: String,
}

impl Guard {
    /// At most `max_requests` served at once, each within `timeout`; a share of them
    /// for each address limited to `rate_per_address` calls a second (`in_flight`).
    pub fn new(
        limits: Arc<Limits>,
        (max_requests, rate_per_address): (usize, u32),
        timeout: Duration,
        shop_page: PageCache,
        (backend, tally): (Backend, Arc<Tally>),
        secrets: Arc<Secrets>,
        shop_login: Option<Arc<ShopLogin>>,
    ) -> Self {
        let slots = Arc::new(Semaphore::new(max_requests.min(Semaphore::MAX_PERMITS)));
        let shares = InFlight::new(max_requests, rate_per_address);
        let pkg_route = "/pkg/".into();
        Self { limits, slots, shares, timeout, shop_page, backend, tally, secrets, shop_login, pkg_route }
    }

    /// The site's files are served under `route` (`LeptosOptions::site_pkg_dir_route_base`).
    pub fn serving_site(mut self, route: String) -> Self {
        self.pkg_route = route;
        self
    }
}

/// The middleware (see the module's doc).
pub async fn front(
    State(guard): State<Arc<Guard>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
    next: Next,
) -> Response {
    let route = monitoring::route_metrics(req.uri().path());
    // Decided before the request is passed on (no copy of its path kept).
    let policy = site::cache_policy(req.uri().path(), &guard.pkg_route);
    let site_file = req.uri().path().starts_with(&guard.pkg_route);
    #[cfg(debug_assertions)]
    let path = req.uri().path().to_owned();
    let started = Instant::now();
    let response = pass(&guard, peer, req, next).await;
    #[cfg(debug_assertions)]
    let response = super::refusals::checked(&path, response).await;
    let mut response = response;
    route.record(started.elapsed(), response.status());
    let headers = response.headers_mut();
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, policy);
    }
    if site_file {
        headers.append(site::VARY.0, site::VARY.1);
    }
    response
}

async fn pass(guard: &Guard, peer: SocketAddr, mut req: Request, next: Next) -> Response {
    if let Err(wait) = rate_limit::admit(&guard.limits, peer, &mut req) {
        count_refused_grab(guard, req).await;
        return rate_limit::refusal(wait);
    }
    // A live feed stays open: neither the cap nor the timeout applies (feeds have caps
    // of their own), but a bearer to count as a guess is counted inside the cap.
    if req.uri().path() == crate::live::FEED_PATH {
        let counting = bearer_fails(guard, &req).then(|| guard.slots.try_acquire());
        if let Some(Err(_)) = counting {
            return refusal(ErrorCode::Unavailable);
        }
        let entry = access::of(req.method(), req.uri().path());
        let admitted = admit_by_table(guard, &mut req, entry).await;
        drop(counting);
        if let Err(refused) = admitted {
            return refused;
        }
        return status_from_code(next.run(req).await, None).await;
    }
    let slot = match take_slot(guard, &req) {
        Ok(slot) => slot,
        Err(NoSlot::OverCap) => return refusal(ErrorCode::Unavailable),
        Err(NoSlot::OverShare) => {
            // Held back as a rate is, and counted so.
            count_refused_grab(guard, req).await;
            return rate_limit::refusal(Duration::ZERO);
        }
    };
    tokio::time::timeout(guard.timeout, serve(guard, req, next, slot))
        .await
        .unwrap_or_else(|_| refusal(ErrorCode::Unavailable))
}

/// A request's place among those served at once: its caller's share first (429 past
/// it, `in_flight`), then the server's cap (503 past it).
struct Slot {
    _share: Option<in_flight::Place>,
    _served: OwnedSemaphorePermit,
}

/// Why a request got no [`Slot`].
enum NoSlot {
    /// Its caller holds its share (429).
    OverShare,
    /// The server serves as many as it may (503).
    OverCap,
}

fn take_slot(guard: &Guard, req: &Request) -> Result<Slot, NoSlot> {
    let client = req.extensions().get::<ClientIp>().copied();
    let share = match (&guard.shares, client) {
        (Some(shares), Some(client)) => Some(shares.take(client).ok_or(NoSlot::OverShare)?),
        _ => None,
    };
    let served = guard.slots.clone().try_acquire_owned().map_err(|_| NoSlot::OverCap)?;
    Ok(Slot { _share: share, _served: served })
}

/// Applies the access table (`server::access`) to a request: a route it names, called
/// with the method the route serves, goes on only for the callers its entry admits;
/// another method is refused (405), and so is an `/api/...` path it does not name
/// (404), before any handler. A bearer sent to a route of the table (what takes
/// one: pages and site files do not) that does not verify is a guess at the admin
/// token, counted ([`count_wrong_bearer`]); a right one costs nothing and is never held
/// back. `entry` is the table's for the request (`access::of`), looked up once by the
/// caller.
async fn admit_by_table(guard: &Guard, req: &mut Request, entry: Option<Access>) -> Result<Option<Access>, Response> {
    let path = req.uri().path();
    let Some(access) = entry else {
        return match access::method_of_listed(path) {
            Some(served) => {
                let mut refused = refusal(ErrorCode::MethodNotAllowed);
                let allow = axum::http::HeaderValue::from_str(served.as_str()).expect("a method is a header value");
                refused.headers_mut().insert(header::ALLOW, allow);
                Err(refused)
            }
            None if !path.starts_with("/api/") => Ok(None),
            None => Err(refusal(ErrorCode::NotFound)),
        };
    };
    let admitted = admit(guard, access, req);
    // A shopper admitted (by a session, or a shop token that verified: a grab) pays no
    // second look at the bearer.
    let look = access != Access::Shopper || admitted.is_err();
    if look && bearer_fails(guard, req) {
        let client = req.extensions().get::<ClientIp>().map_or(std::net::Ipv4Addr::UNSPECIFIED.into(), |c| c.0);
        count_wrong_bearer(guard, client).await?;
    }
    admitted.map(|()| Some(access)).map_err(refusal)
}

/// Whether the request carries a bearer that is neither the admin token nor (with the
/// shop's own login) a shopper's token that verifies. With the shop's own login, a
/// bearer that could not be the admin token by its form is a shopper's token, valid or
/// not, and no guess: a shopper whose token expired hears `not_signed_in` (and signs
/// in again at the shop), never a wait counted against the address (an attack,
/// 2026-11-30: expired tokens behind one address were answered 429, up to 15 minutes).
fn bearer_fails(guard: &Guard, req: &Request) -> bool {
    let headers = req.headers();
    let Some(token) = crate::auth::session::bearer(headers) else { return false };
    let shoppers = || {
        guard.shop_login.as_ref().is_some_and(|login| {
            !guard.secrets.could_be_the_token(token) || login.subject_of(req.extensions(), headers).is_some()
        })
    };
    !guard.secrets.token_matches(token) && !shoppers()
}

/// Counts a bearer that did not verify as a guess at the admin token
/// (`auth::attempts::wrong_bearer`): 429 while the token's counters say the caller's
/// address must wait (its failed passwords do not count there).
async fn count_wrong_bearer(guard: &Guard, client: IpAddr) -> Result<(), Response> {
    match attempts::wrong_bearer(&guard.backend, client).await {
        Ok(None) => Ok(()),
        Ok(Some(wait)) => Err(rate_limit::refusal(wait)),
        Err(e) => {
            tracing::warn!("counting a guess at the admin token: {e}");
            Err(refusal(ErrorCode::Unavailable))
        }
    }
}

/// Lets the request through to its handler if its caller is one `access` admits, and
/// hands the handler what was found: the shopper's session (`SessionChecked`), or the
/// operator (`Caller`).
fn admit(guard: &Guard, access: Access, req: &mut Request) -> Result<(), AppError> {
    let headers = req.headers();
    match access {
        Access::Anyone => Ok(()),
        Access::Shopper => {
            // As the rate limit checked it when the headers came, or checked now. The
            // handler asks again whether the session is still on, when it acts
            // (`caller::shopper`): once per call, after the body.
            let (signed_in, checked_now) = match req.extensions().get::<SessionChecked>() {
                Some(checked) => (checked.0.is_some(), None),
                None => {
                    let found = SessionChecked(guard.secrets.session_key(headers));
                    (found.0.is_some(), Some(found))
                }
            };
            let shop_token = || guard.shop_login.as_ref()?.subject_of(req.extensions(), headers);
            if !signed_in && shop_token().is_none() {
                return Err(ErrorCode::NotSignedIn.into());
            }
            if let Some(checked) = checked_now {
                req.extensions_mut().insert(checked);
            }
            Ok(())
        }
        Access::Operator | Access::AdminRole | Access::AdminToken => {
            let actor = guard.secrets.actor(headers).ok_or(ErrorCode::OperatorRequired)?;
            match access {
                Access::AdminRole if actor.role() != Role::Admin => Err(caller::needs_an_admin()),
                Access::AdminToken if actor != Actor::Token => {
                    Err(AppError::with(ErrorCode::OperatorRequired, "This needs the admin token."))
                }
                _ => {
                    req.extensions_mut().insert(Caller(actor));
                    Ok(())
                }
            }
        }
    }
}

/// A shopper's grab refused over its rate is counted for its sale's report: its
/// arguments are read for the sale, briefly (a caller that does not send them is not
/// waited for). Only a signed-in shopper's grab (a session whose signature holds) is
/// counted: an anonymous flood is not a sale's answer, and must not cost a write each.
/// So is a shop token's shopper's, when the per-shopper limit found its token valid.
async fn count_refused_grab(guard: &Guard, req: Request) {
    let grab = <sale::api::Grab as server_fn::ServerFn>::PATH;
    if req.method() != Method::POST || req.uri().path() != grab {
        return;
    }
    let shop_token = req.extensions().get::<SubjectChecked>().is_some_and(|s| s.0.is_some());
    if !shop_token && guard.secrets.session_user(req.headers()).is_none() {
        return;
    }
    #[derive(serde::Deserialize)]
    struct Sale {
        voucher_id: i64,
    }
    let read = tokio::time::timeout(REFUSED_BODY_WAIT, read_capped(req.into_body(), REFUSED_BODY_MAX)).await;
    if let Some(sale) = read.ok().and_then(Result::ok).and_then(|b| serde_json::from_slice::<Sale>(&b).ok()) {
        crate::sale::grab::answered(&guard.tally, sale.voucher_id, Outcome::RateLimited);
    }
}

/// How long, and how much, a grab refused over its rate is read for its sale.
const REFUSED_BODY_WAIT: Duration = Duration::from_millis(100);
const REFUSED_BODY_MAX: usize = 4 * 1024;

/// Serves a request that has its slot: the shop page from the shared render,
/// `/api/...` calls under the API's rules.
async fn serve(guard: &Guard, req: Request, next: Next, slot: Slot) -> Response {
    if guard.shop_page.applies(&req) {
        return guard.shop_page.serve(req, next).await;
    }
    // One lookup in the table per request, a grab included.
    let entry = access::of(req.method(), req.uri().path());
    if !req.uri().path().starts_with("/api/") {
        let mut req = req;
        if let Err(refused) = admit_by_table(guard, &mut req, entry).await {
            return refused;
        }
        return next.run(req).await;
    }
    // A shop token's shopper meets the per-shopper limit here, inside the cap.
    let mut req = req;
    if let Err(wait) = rate_limit::admit_shop_token(&guard.limits, &mut req) {
        count_refused_grab(guard, req).await;
        return rate_limit::refusal(wait);
    }
    // A call: a POST the table names (its POSTs are server functions). Another method,
    // or a path nothing serves, is refused as such below.
    let call = req.method() == Method::POST && entry.is_some();
    if call {
        if let Err(code) = check_same_site_json(req.headers()) {
            return refusal(code);
        }
    }
    // The body is read before a caller is refused: a refusal sent while the caller is
    // still sending would cut its connection short.
    // A call's arguments as sent (the bytes read, shared, not copied) name the field at
    // fault should the call be refused for its body (`status_from_code`).
    let (mut req, sent) = if sale::hot_path::is_own(req.uri().path()) {
        (req, None)
    } else {
        match capped(req, call).await {
            Ok((req, bytes)) => {
                let sent = call.then(|| (req.uri().clone(), bytes));
                (req, sent)
            }
            Err(refused) => return refused,
        }
    };
    let access = match admit_by_table(guard, &mut req, entry).await {
        Ok(access) => access,
        Err(refused) => {
            // The grab routes' bodies were not read above: read as much as their handlers
            // would (a refusal sent mid-upload cuts the caller's connection short).
            if sale::hot_path::is_own(req.uri().path()) {
                let _ = read_capped(req.into_body(), sale::hot_path::MAX_ARGS_BYTES).await;
            }
            return refused;
        }
    };
    let answer = |req| async { status_from_code(next.run(req).await, sent).await };
    // Keys are kept for calls that change something for a caller: a shopper's or an
    // operator's POST (`server::idempotency`).
    let keyed = call && access.is_some_and(|a| a != Access::Anyone);
    let key = match idempotency::key(req.headers()).filter(|_| keyed) {
        Some(Err(malformed)) => return refusal(malformed),
        key => key.and_then(Result::ok),
    };
    let scope = key.as_ref().and_then(|_| idempotency::scope(&req, || shop_subject(guard, &req)));
    if scope.is_some() {
        req.extensions_mut().insert(sale::hot_path::Keyed);
    }
    let backend = guard.backend.clone();
    let run = async move {
        // The request's slot is held to the end, should its caller go first.
        let _slot = slot;
        match key.zip(scope) {
            Some((key, scope)) => idempotency::once(&backend, &scope, &key, req, answer).await,
            None => answer(req).await,
        }
    };
    if call && access.is_some_and(Access::is_operators) {
        to_the_end(run).await
    } else {
        run.await
    }
}

/// Runs an operator's call to its end, even if its caller goes away first (a cut
/// connection, the request's timeout): a change it made is then announced and written
/// to the audit log too (an attack, 2026-11-30: a create_voucher cut short after its
/// insert left a sale nobody's log names). It keeps its slot of the cap, and ends
/// within `idempotency::LONGEST_CALL`, while its key's pending mark holds.
async fn to_the_end(run: impl std::future::Future<Output = Response> + Send + 'static) -> Response {
    use tracing::Instrument;
    let bounded = async {
        let ran = tokio::time::timeout(idempotency::LONGEST_CALL, run).await;
        if ran.is_err() {
            let most = idempotency::LONGEST_CALL;
            tracing::error!("an operator's call ran past {most:?} and was cut: it may be made in part, and not logged");
        }
        ran
    };
    match tokio::spawn(bounded.in_current_span()).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(_)) => refusal(ErrorCode::Unavailable),
        Err(_) => refusal(ErrorCode::Internal),
    }
}

/// The shopper a shop's token names (with the shop's own login on).
fn shop_subject(guard: &Guard, req: &Request) -> Option<String> {
    guard.shop_login.as_ref()?.subject_of(req.extensions(), req.headers()).map(|s| s.to_string())
}

/// The request with its body read, and the bytes read; or the refusal of a body past
/// [`MAX_API_BODY`]. A call's (a server function's: `arguments`) must be a JSON object
/// (`body::check_object`).
async fn capped(req: Request, arguments: bool) -> Result<(Request, Bytes), Response> {
    let (parts, body) = req.into_parts();
    let read = read_capped(body, MAX_API_BODY).await;
    match read.and_then(|bytes| if arguments { check_object(&bytes).map(|()| bytes) } else { Ok(bytes) }) {
        Ok(bytes) => Ok((Request::from_parts(parts, Body::from(bytes.clone())), bytes)),
        Err(e) => Err(e.into_response()),
    }
}

fn check_same_site_json(headers: &HeaderMap) -> Result<(), ErrorCode> {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    if text("sec-fetch-site") == Some("cross-site") {
        return Err(ErrorCode::CrossSite);
    }
    // Browsers send Origin on cross-origin POSTs; it must name the host asked.
    if let (Some(origin), Some(host)) = (text(header::ORIGIN.as_str()), text(header::HOST.as_str())) {
        let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
        if !origin_host.eq_ignore_ascii_case(host) {
            return Err(ErrorCode::CrossSite);
        }
    }
    let media_type = text(header::CONTENT_TYPE.as_str()).and_then(|v| v.split(';').next()).map(str::trim);
    if !media_type.is_some_and(|m| m.eq_ignore_ascii_case("application/json")) {
        return Err(ErrorCode::UnsupportedMediaType);
    }
    Ok(())
}

/// `/api/...` paths no endpoint serves.
pub async fn not_found() -> Response {
    refusal(ErrorCode::NotFound)
}

/// Gives an `/api/...` refusal the HTTP status its error code calls for. The
/// server-function layer answers every error with 500, including bodies it could not
/// decode (the caller's fault). Mapping here, from the JSON error body, keeps one rule
/// for all endpoints: 4xx for the caller's fault, 5xx only for ours. A body refused
/// without a field named (the decoder names a line and a column) is decoded again from
/// what was `sent` to name it (`access::body_fault`).
async fn status_from_code(res: Response, sent: Option<(Uri, Bytes)>) -> Response {
    if res.status() == StatusCode::METHOD_NOT_ALLOWED {
        let mut refused = refusal(ErrorCode::MethodNotAllowed);
        if let Some(allow) = res.headers().get(header::ALLOW) {
            refused.headers_mut().insert(header::ALLOW, allow.clone());
        }
        return refused;
    }
    let json = |res: &Response| {
        let media = res.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
        media.starts_with("application/json")
    };
    if res.status().is_client_error() && !json(&res) {
        return framework_refusal(res).await;
    }
    if res.status() != StatusCode::INTERNAL_SERVER_ERROR {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let Ok(bytes) = to_bytes(body, MAX_ERROR_BODY).await else {
        parts.status = StatusCode::INTERNAL_SERVER_ERROR;
        return Response::from_parts(parts, Body::empty());
    };
    if let Ok(err) = serde_json::from_slice::<AppError>(&bytes) {
        let unnamed = err.code == ErrorCode::InvalidInput && err.param.is_none();
        let named = sent.filter(|_| unnamed).and_then(|(uri, sent)| access::body_fault(uri.path(), &sent));
        if let Some(named) = named {
            return named.into_response();
        }
        parts.status = StatusCode::from_u16(err.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// A refusal the framework wrote itself (an extractor's rejection: a query string it
/// could not read, say; its 405 is answered above, with `Allow`), in plain text: answered as every refusal is, JSON with a
/// documented code. Its text names what was wrong with the caller's input, never ours.
async fn framework_refusal(res: Response) -> Response {
    let status = res.status();
    let code = match status {
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::UnsupportedMediaType,
        StatusCode::TOO_MANY_REQUESTS => ErrorCode::RateLimited,
        _ => ErrorCode::InvalidInput,
    };
    let text = to_bytes(res.into_body(), MAX_ERROR_BODY).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let said = text.trim().chars().take(200).collect::<String>();
    let message =
        if code == ErrorCode::InvalidInput && !said.is_empty() { said } else { code.default_message().into() };
    refusal(AppError::with(code, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (header::HeaderName::from_static(k), HeaderValue::from_static(v))).collect()
    }

    #[test]
    fn only_same_site_json_passes() {
        let json = ("content-type", "application/json; charset=utf-8");
        let host = ("host", "shop.example:3000");
        assert_eq!(check_same_site_json(&headers(&[json, host])), Ok(()));
        assert_eq!(check_same_site_json(&headers(&[json, host, ("origin", "http://shop.example:3000")])), Ok(()));
        assert_eq!(check_same_site_json(&headers(&[json, ("sec-fetch-site", "same-origin")])), Ok(()));
        for bad in [
            headers(&[("content-type", "text/plain"), host]),
            headers(&[("content-type", "application/x-www-form-urlencoded")]),
            headers(&[host]),
        ] {
            assert_eq!(check_same_site_json(&bad), Err(ErrorCode::UnsupportedMediaType));
        }
        assert_eq!(
            check_same_site_json(&headers(&[json, host, ("origin", "https://evil.example")])),
            Err(ErrorCode::CrossSite)
        );
        assert_eq!(
            check_same_site_json(&headers(&[json, ("sec-fetch-site", "cross-site")])),
            Err(ErrorCode::CrossSite)
        );
    }
}
