//! `Idempotency-Key`, by Stripe's rules: a call sent again with the key it was first
//! sent with, and the same body, within [`KEPT`], answers what the first answered
//! (with `Idempotent-Replayed: true`) and does nothing again; the same key with
//! another body is refused (`idempotency_key_reused`), and while the first is still
//! being served, so is the second (`idempotency_in_progress`: retry in a moment).
//!
//! Keys are the caller's own: a signed-in shopper's, a shop-token shopper's, an
//! operator's or the admin token's, on the calls for shoppers and operators (a key
//! sent to a call for anyone, or to a GET, is not looked at). They
//! live in Redis, so a retry that lands on another process is answered the same;
//! an operator's keys are taken in the database too (`idempotency_answers`), and their
//! answers copied there, so a retry after Redis lost its data answers the first answer,
//! or that the first call is still being served, rather than changing a sale again. An
//! answer that did nothing (`unavailable`: try again; `rate_limited`) is not kept, so
//! the retry is served afresh; every other is, `saved_not_applied` included (a retry
//! is told it is saved, and changes nothing).

use crate::{
    auth::caller::{Caller, SessionChecked},
    auth::session::Actor,
    backend::{db_clock, layout, Backend, Db},
    body::read_capped,
    error::{AppError, ErrorCode},
};
use axum::{
    body::{to_bytes, Body},
    extract::Request,
    http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode},
    response::{IntoResponse, Response},
};
use sha2::{Digest, Sha256};
use std::{
    future::Future,
    sync::{Mutex, PoisonError},
    time::Duration,
};

/// The request header.
pub const HEADER: HeaderName = HeaderName::from_static("idempotency-key");
/// The answer's header when it is a replay.
pub const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
/// How long a key's answer is kept (Stripe: 24 hours).
pub const KEPT: Duration = layout::IDEMPOTENCY_KEPT;
/// A key while its first call is served: long enough for any call (the front door's
/// timeout is shorter, and an operator's call that outlives its caller ends within
/// [`LONGEST_CALL`]), short enough that a process that died mid-call frees it soon.
const PENDING: Duration = Duration::from_secs(60);
/// A shopper's key while its first call is served: a shopper's calls (a grab, a
/// payment, a cancel) end within seconds and may run twice without harm (the gate and
/// the order's row decide once), so a call whose process died mid-call, or whose mark
/// was set after its caller stopped waiting, holds the key only this long. With
/// [`PENDING`] a shopper retrying a grab with its key heard `idempotency_in_progress`
/// for a minute after a `kill -9`, their order untold (a drill, 2026-11-30).
pub const SHOPPER_PENDING: Duration = Duration::from_secs(10);
/// How long a shopper's call waits for its key to be looked up: a grab waits at most
/// this long on Redis (`sale::grab::REDIS_DEADLINE`), keyed or not.
const SHOPPER_LOOKUP: Duration = crate::sale::REDIS_DEADLINE;
/// Longest an operator's call runs on after its caller has gone (`api_guard`): within
/// [`PENDING`], so its key is not freed for a second run while it still runs. The
/// request timeout stays below it (`config`).
pub const LONGEST_CALL: Duration = Duration::from_secs(50);
/// The longest key (Stripe's).
const MAX_KEY: usize = 255;
/// The largest answer kept; a larger one (a long list: a read, harmless to send
/// again) is answered and its key let go.
const MAX_KEPT_ANSWER: usize = 16 * 1024;
/// Keys one caller may have kept at once (counted over [`KEPT`] from their first):
/// what a caller can make Redis keep is bounded, at most this many answers of at
/// most [`MAX_KEPT_ANSWER`]. Past it a keyed call is refused (`rate_limited`).
pub const MOST_KEYS_PER_CALLER: u64 = 1_000;
/// The largest answer kept for a shopper's key: a shopper's call that changes
/// something answers one grab or one order (a few hundred bytes); a larger answer is a
/// read (a page of their orders), harmless to send again.
pub const MAX_KEPT_SHOPPER_ANSWER: usize = 2 * 1024;
/// Shoppers' answers one process keeps a UTC day at most, all shoppers together.
/// Shoppers' accounts are cheap to make, so a bound per caller alone does not bound
/// what Redis keeps (thousands of accounts, each with its thousand keys). Only a
/// shopper's call that was made is kept (a refusal did nothing: a retry is served
/// afresh), and past the budget none is: a retry is then served afresh, and a grab's
/// or a payment's answers what the first made (`already_bought` with the order's id and receipt,
/// the order as paid), without a replay's header; a password change or a sign-out
/// everywhere sent again is refused, as the first was made. At most this many answers
/// of at most [`MAX_KEPT_SHOPPER_ANSWER`] a day and process.
pub const MOST_SHOPPER_ANSWERS_A_DAY: u64 = 100_000;
/// The largest body read to tell two calls apart (the API's own cap).
const MAX_BODY: usize = 64 * 1024;

/// A usable key, as the API document's pattern: 1 to [`MAX_KEY`] visible ASCII
/// characters (`!` to `~`), what [`key`] takes.
pub fn key_pattern() -> String {
    format!("^[!-~]{{1,{MAX_KEY}}}$")
}

/// The key the request carries: none, a usable one, or a refusal of a malformed one.
pub fn key(headers: &HeaderMap) -> Option<Result<String, AppError>> {
    let raw = headers.get(HEADER)?;
    let usable =
        raw.to_str().ok().filter(|k| (1..=MAX_KEY).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_graphic()));
    Some(usable.map(str::to_owned).ok_or_else(|| {
        AppError::invalid(format!("Idempotency-Key must be 1 to {MAX_KEY} visible ASCII characters."))
            .on("Idempotency-Key")
    }))
}

/// Whose keys a request's are, once the front door admitted it: `None` for a call
/// without a caller (its key is not kept).
pub fn scope(req: &Request, shop_subject: impl FnOnce() -> Option<String>) -> Option<String> {
    if let Some(Caller(actor)) = req.extensions().get::<Caller>() {
        return Some(match actor {
            Actor::Token => "token".to_owned(),
            Actor::Operator { id, .. } => format!("operator:{id}"),
        });
    }
    match req.extensions().get::<SessionChecked>() {
        Some(SessionChecked(Some(session))) => Some(format!("{SHOPPER}{}", session.user_id)),
        Some(SessionChecked(None)) => shop_subject().map(|s| format!("{SHOP}{s}")),
        None => None,
    }
}

/// Whether a [`scope`] is a shopper's (signed in, or the shop token's): the callers
/// anyone can make more of.
fn is_shoppers(scope: &str) -> bool {
    scope.starts_with(SHOPPER) || scope.starts_with(SHOP)
}

/// The [`scope`] of a signed-in shopper's keys (then their user id), and of a shop
/// token's shopper's (then the token's subject).
const SHOPPER: &str = "shopper:";
const SHOP: &str = "shop:";

/// A count of what this process kept on one UTC day, up to `most`.
struct DailyBudget {
    most: u64,
    /// The day (since the Unix epoch) counted, and what was kept on it.
    kept: Mutex<(i64, u64)>,
}

impl DailyBudget {
    const fn new(most: u64) -> Self {
        Self { most, kept: Mutex::new((0, 0)) }
    }

    /// Takes one of `day`'s: false when they are all taken.
    fn take(&self, day: i64) -> bool {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.0 != day {
            *kept = (day, 0);
        }
        let free = kept.1 < self.most;
        kept.1 += u64::from(free);
        free
    }
}

/// Shoppers' answers this process kept today ([`MOST_SHOPPER_ANSWERS_A_DAY`]).
static SHOPPER_ANSWERS: DailyBudget = DailyBudget::new(MOST_SHOPPER_ANSWERS_A_DAY);

/// Whether an answer (`status`, `len` bytes) to `scope`'s key may be kept: within its
/// size, and for a shopper's, a call that was made (a success) within this process's
/// budget of the day.
fn may_keep(scope: &str, (status, len): (StatusCode, usize)) -> bool {
    if !is_shoppers(scope) {
        return len <= MAX_KEPT_ANSWER;
    }
    let today = chrono::Utc::now().timestamp().div_euclid(86_400);
    status.is_success() && len <= MAX_KEPT_SHOPPER_ANSWER && SHOPPER_ANSWERS.take(today)
}

/// Serves `req` once per key: the first time through `serve`, after that from what
/// the first answered.
pub async fn once<F, Fut>(backend: &Backend, scope: &str, key: &str, req: Request, serve: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let (parts, body) = req.into_parts();
    let bytes = match read_capped(body, MAX_BODY).await {
        Ok(bytes) => bytes,
        Err(e) => return e.into_response(),
    };
    let (print, (stored_at, count_at)) =
        kept_at(&backend.namespace, scope, key, (&parts.method, parts.uri.path(), &bytes));
    let shoppers = is_shoppers(scope);
    let held_for = if shoppers { SHOPPER_PENDING } else { PENDING };
    // One round trip, one slot: the caller's count, and the key taken if it is free.
    let mut redis = backend.redis.clone();
    let mut pipe = redis::pipe();
    pipe.atomic()
        .incr(&count_at, 1)
        .cmd("EXPIRE")
        .arg(&count_at)
        .arg(KEPT.as_secs())
        .arg("NX")
        .ignore()
        .cmd("SET")
        .arg(&stored_at)
        .arg(pending(&print))
        .arg("NX")
        .arg("PX")
        .arg(held_for.as_millis() as u64);
    let taken = pipe.query_async::<(u64, Option<String>)>(&mut redis);
    let taken = match shoppers {
        true => tokio::time::timeout(SHOPPER_LOOKUP, taken)
            .await
            .unwrap_or_else(|_| Err((redis::ErrorKind::IoError, "no answer within the grab's deadline").into())),
        false => taken.await,
    };
    match taken {
        Ok((count, Some(_))) if count > MOST_KEYS_PER_CALLER => {
            let _: Result<(), _> = redis::AsyncCommands::del(&mut backend.redis.clone(), &stored_at).await;
            let message = format!("At most {MOST_KEYS_PER_CALLER} Idempotency-Keys a day; send this call without one.");
            return AppError::with(ErrorCode::RateLimited, message).into_response();
        }
        // Free in Redis: an operator's key is taken in the database too, where its
        // answer, or the mark of a first call still served, may be kept still. Not
        // known (the database does not answer in time): not served, as when Redis
        // does not answer, lest a change be made twice.
        Ok((_, Some(_))) if !shoppers => match taken_in_database(backend, &stored_at, &print).await {
            Ok(Some(stored)) => return replay(&stored, &print),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!("idempotency key, the database's copy: {e}");
                let _: Result<(), _> = redis::AsyncCommands::del(&mut backend.redis.clone(), &stored_at).await;
                return AppError::from(ErrorCode::Unavailable).into_response();
            }
        },
        Ok((_, Some(_))) => {}
        Ok((_, None)) => return earlier(backend, &stored_at, &print).await,
        Err(e) => {
            tracing::warn!("idempotency key: {e}");
            return AppError::from(ErrorCode::Unavailable).into_response();
        }
    }
    let answer = serve(Request::from_parts(parts, Body::from(bytes))).await;
    keep(backend, scope, (&stored_at, &print), answer).await
}

/// What a key holds while its first call (fingerprint `print`) is served, in Redis and
/// in the database.
fn pending(print: &str) -> String {
    format!("pending {print}")
}

/// A call's fingerprint, and where `scope`'s `key` is kept (with the caller's count).
fn kept_at(namespace: &str, scope: &str, key: &str, call: (&Method, &str, &[u8])) -> (String, (String, String)) {
    let print = fingerprint(call.0.as_str(), call.1, call.2);
    (print, layout::idempotency(namespace, &digest(&[scope.as_bytes()]), &digest(&[key.as_bytes()])))
}

/// Where `scope`'s `key` is kept, and the mark a first call of `path` with `body`
/// leaves there while it is served: what a test writes to stand for a first call
/// still under way on another process.
pub fn pending_mark(namespace: &str, scope: &str, key: &str, path: &str, body: &[u8]) -> (String, String) {
    let (print, (stored_at, _)) = kept_at(namespace, scope, key, (&Method::POST, path, body));
    (stored_at, pending(&print))
}

/// The answer to a key already taken: the first call's, or a refusal.
async fn earlier(backend: &Backend, stored_at: &str, print: &str) -> Response {
    let stored: Option<String> = match redis::AsyncCommands::get(&mut backend.redis.clone(), stored_at).await {
        Ok(stored) => stored,
        Err(e) => {
            tracing::warn!("idempotency key: {e}");
            return AppError::from(ErrorCode::Unavailable).into_response();
        }
    };
    taken(stored.as_deref(), print)
}

/// The answer to a key found taken, from what it holds now (`stored`): the first call's
/// answer or a refusal ([`replay`]); when it holds nothing, gone since it was found
/// taken (its first call answered and let it go, as a shopper's refusal does), the
/// caller asks again in a moment and is served afresh. Before, that read as another
/// body under the key (a review, 2026-12-02: `idempotency_key_reused`, which a client
/// takes as its own mistake and stops).
fn taken(stored: Option<&str>, print: &str) -> Response {
    match stored {
        Some(stored) => replay(stored, print),
        None => AppError::from(ErrorCode::IdempotencyInProgress).into_response(),
    }
}

/// Takes an operator's key in the database (`idempotency_answers`) as Redis's was just
/// taken, with the mark of a call being served (`pending <print>`) for [`PENDING`];
/// or, when the database holds the key already, answers what it holds there: the
/// first call's answer (put back in Redis in place of the mark just taken, for as long
/// as it has left), or the mark of a first call still being served. Redis keeps each
/// key, and the database a copy: a failover that lost the last writes, or a restart
/// without Redis's file, forgot the keys of changes made just before or being made,
/// and the retries a lost answer brings made them again. Asked for [`DATABASE_WAIT`]
/// at most. Should Redis refuse the answer put back, the mark stays until it lapses
/// (`idempotency_in_progress` until then).
async fn taken_in_database(backend: &Backend, stored_at: &str, print: &str) -> Result<Option<String>, String> {
    let (db, at, mark) = (backend.db.clone(), stored_at.to_owned(), pending(print));
    let mut claim = tokio::spawn(async move { claim_in_database(&db, &at, &mark).await });
    let kept = match tokio::time::timeout(DATABASE_WAIT, &mut claim).await {
        Ok(joined) => joined.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?,
        Err(_) => {
            // The claim may still land (the statement runs on): once it does, it is let
            // go, lest it hold the key for [`PENDING`] after this call did nothing.
            let (db, stored_at, mark) = (backend.db.clone(), stored_at.to_owned(), pending(print));
            tokio::spawn(async move {
                if let Ok(Ok(Claim::Taken)) = claim.await {
                    free_in_database(db, stored_at, mark).await;
                }
            });
            return Err("no answer in time".to_owned());
        }
    };
    let Claim::Held { answer, left_ms } = kept else { return Ok(None) };
    if answer.starts_with("done ") {
        let put: redis::RedisResult<()> = redis::cmd("SET")
            .arg(stored_at)
            .arg(&answer)
            .arg("PX")
            .arg(left_ms.max(1))
            .query_async(&mut backend.redis.clone())
            .await;
        if let Err(e) = put {
            tracing::warn!("idempotency key: {e}");
        }
    }
    Ok(Some(answer))
}

/// What [`claim_in_database`] found.
enum Claim {
    /// The key was free (or what it held had lapsed): it holds this call's mark now.
    Taken,
    /// The key holds `answer` for `left_ms` more.
    Held { answer: String, left_ms: u64 },
}

/// Takes `stored_at` in the database with `mark` for [`PENDING`], unless it holds
/// something that has not lapsed. Lapsing is judged by the database's clock, the one
/// clock every process shares: a process whose own clock ran ahead would take over a
/// first call's key while it is still served.
async fn claim_in_database(db: &Db, stored_at: &str, mark: &str) -> sqlx::Result<Claim> {
    let now = db_clock::now_ms(db).await?;
    let taken = sqlx::query(
        "INSERT INTO idempotency_answers (kept_at, answer, kept_until) VALUES ($1, $2, $3) \
         ON CONFLICT (kept_at) DO UPDATE SET answer = excluded.answer, kept_until = excluded.kept_until \
         WHERE idempotency_answers.kept_until <= $4",
    )
    .bind(stored_at)
    .bind(mark)
    .bind(now + PENDING.as_millis() as i64)
    .bind(now)
    .execute(db)
    .await?;
    if taken.rows_affected() == 1 {
        return Ok(Claim::Taken);
    }
    let held: Option<(String, i64)> =
        sqlx::query_as("SELECT answer, kept_until FROM idempotency_answers WHERE kept_at = $1")
            .bind(stored_at)
            .fetch_optional(db)
            .await?;
    // Let go between the two statements (its first call's answer was not kept): free,
    // and served as a key Redis alone holds.
    let Some((answer, until)) = held else { return Ok(Claim::Taken) };
    Ok(Claim::Held { answer, left_ms: u64::try_from(until - now).unwrap_or(1) })
}

/// Lets go of an operator's key taken in the database (with `mark`) by a call whose
/// answer is not kept ([`taken_in_database`]), so that a retry is served afresh at
/// once; should it fail, or take longer than [`DATABASE_WAIT`], the mark lapses at
/// [`PENDING`]. Owns what it needs: a claim that landed late is let go on a task of
/// its own.
async fn free_in_database(db: Db, stored_at: String, mark: String) {
    let freed = sqlx::query("DELETE FROM idempotency_answers WHERE kept_at = $1 AND answer = $2")
        .bind(&stored_at)
        .bind(&mark)
        .execute(&db);
    match tokio::time::timeout(DATABASE_WAIT, freed).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!("idempotency key, the database's copy: {e}"),
        Err(_) => tracing::warn!("idempotency key, the database's copy: no answer in time"),
    }
}

/// How long a call waits on the database for an operator's kept answer.
const DATABASE_WAIT: Duration = Duration::from_secs(2);

/// Copies an operator's `answer` (as Redis holds it, kept there already) to the
/// database until `until` (Unix ms), over the call's mark, and lets the copies kept
/// past their time go: in a task of its own, so the call's answer waits on neither (on
/// SQLite a write may wait its turn behind the worker's; the call waited on one write
/// already, its key's claim, for [`DATABASE_WAIT`] at most). Should it fail, the answer is kept in Redis
/// alone, as it was before the copy.
fn keep_in_database(backend: &Backend, stored_at: &str, answer: String, until: i64) {
    let (db, stored_at) = (backend.db.clone(), stored_at.to_owned());
    tokio::spawn(async move {
        let copied = async {
            sqlx::query(
                "INSERT INTO idempotency_answers (kept_at, answer, kept_until) VALUES ($1, $2, $3) \
                 ON CONFLICT (kept_at) DO UPDATE SET answer = excluded.answer, kept_until = excluded.kept_until",
            )
            .bind(&stored_at)
            .bind(&answer)
            .bind(until)
            .execute(&db)
            .await?;
            sqlx::query("DELETE FROM idempotency_answers WHERE kept_until < $1")
                .bind(chrono::Utc::now().timestamp_millis())
                .execute(&db)
                .await
        };
        if let Err(e) = copied.await {
            tracing::warn!("idempotency key, the database's copy: {e}");
        }
    });
}

/// The first call's answer as kept (`stored`), for a call whose fingerprint is
/// `print`: a replay, or a refusal (another body, or the first still being served).
fn replay(stored: &str, print: &str) -> Response {
    let mut fields = stored.splitn(4, ' ');
    let (state, first_print) = (fields.next().unwrap_or_default(), fields.next().unwrap_or_default());
    if first_print != print {
        return AppError::from(ErrorCode::IdempotencyKeyReused).into_response();
    }
    let status = fields.next().and_then(|s| s.parse::<u16>().ok()).and_then(|s| StatusCode::from_u16(s).ok());
    match (state, status) {
        ("done", Some(status)) => {
            let mut replay = Response::new(Body::from(fields.next().unwrap_or_default().to_owned()));
            *replay.status_mut() = status;
            replay.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            replay.headers_mut().insert(REPLAYED, HeaderValue::from_static("true"));
            replay
        }
        // Still being served (or gone just now): the caller asks again in a moment.
        _ => AppError::from(ErrorCode::IdempotencyInProgress).into_response(),
    }
}

/// Keeps `answer` under `scope`'s key for [`KEPT`], or lets the key go when the answer
/// did nothing or may not be kept ([`may_keep`]); answers it either way.
async fn keep(backend: &Backend, scope: &str, (stored_at, print): (&str, &str), answer: Response) -> Response {
    let (parts, body) = answer.into_parts();
    // Read whole: it is this server's own answer, made in memory (a page of a list at
    // most), whatever its size; only one of at most `MAX_KEPT_ANSWER` is kept.
    let bytes = to_bytes(body, usize::MAX).await;
    let mut redis = backend.redis.clone();
    let did_nothing = |bytes: &[u8]| {
        serde_json::from_slice::<AppError>(bytes)
            .is_ok_and(|e| matches!(e.code, ErrorCode::Unavailable | ErrorCode::RateLimited))
    };
    let kept = match &bytes {
        Ok(bytes)
            if !did_nothing(bytes)
                && std::str::from_utf8(bytes).is_ok()
                && may_keep(scope, (parts.status, bytes.len())) =>
        {
            let value = format!("done {print} {} {}", parts.status.as_u16(), String::from_utf8_lossy(bytes));
            let kept = redis::cmd("SET")
                .arg(stored_at)
                .arg(&value)
                .arg("PX")
                .arg(KEPT.as_millis() as u64)
                .query_async::<()>(&mut redis)
                .await;
            if !is_shoppers(scope) {
                let until = chrono::Utc::now().timestamp_millis() + KEPT.as_millis() as i64;
                keep_in_database(backend, stored_at, value, until);
            }
            kept
        }
        _ => {
            // The database's first, and waited for: a retry sent as this is answered
            // finds Redis's key free, and must find the database's free too. Let go on a
            // task of its own, a retry found the database's mark still there now and
            // then, and heard `idempotency_in_progress` (a full run, 2026-12-01).
            if !is_shoppers(scope) {
                free_in_database(backend.db.clone(), stored_at.to_owned(), pending(print)).await;
            }
            redis::AsyncCommands::del::<_, ()>(&mut redis, stored_at).await
        }
    };
    if let Err(e) = kept {
        // The key expires with its pending mark: a retry then is served afresh (an
        // operator's from the database's copy, when it was made).
        tracing::warn!("idempotency key: {e}");
    }
    match bytes {
        Ok(bytes) => Response::from_parts(parts, Body::from(bytes)),
        // The answer's body failed as it was read: nobody is owed a half of it.
        Err(_) => AppError::from(ErrorCode::Internal).into_response(),
    }
}

/// What tells two calls under one key apart: method, path and body.
fn fingerprint(method: &str, path: &str, body: &[u8]) -> String {
    digest(&[method.as_bytes(), path.as_bytes(), body])
}

/// A hex SHA-256 of the parts, each length-prefixed so no two lists run together.
fn digest(parts: &[&[u8]]) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part);
    }
    hex::encode(hash.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_one_to_255_visible_characters() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(HEADER, HeaderValue::from_str(v).unwrap());
            key(&h)
        };
        assert!(key(&HeaderMap::new()).is_none());
        assert_eq!(with("order-42").unwrap().unwrap(), "order-42");
        assert!(with(&"k".repeat(255)).unwrap().is_ok());
        assert!(with(&"k".repeat(256)).unwrap().is_err());
        assert!(with("").unwrap().is_err());
        assert!(with("two words").unwrap().is_err());
    }

    #[test]
    fn a_key_gone_as_it_is_read_is_asked_again_not_refused_as_reused() {
        let code = |r: Response| r.status();
        let print = fingerprint("POST", "/api/grab", b"{}");
        assert_eq!(code(taken(None, &print)), StatusCode::CONFLICT);
        let other = taken(Some(&pending("another")), &print);
        assert_eq!(code(other), StatusCode::UNPROCESSABLE_ENTITY, "another body");
    }

    #[test]
    fn shoppers_answers_are_kept_within_a_budget_of_the_day() {
        let budget = DailyBudget::new(2);
        assert_eq!([budget.take(7), budget.take(7), budget.take(7)], [true, true, false], "two a day");
        assert!(budget.take(8), "a new day, a new budget");
        assert!(is_shoppers("shopper:12") && is_shoppers("shop:ann"));
        assert!(!is_shoppers("operator:3") && !is_shoppers("token"));
        let ok = StatusCode::OK;
        assert!(may_keep("token", (ok, MAX_KEPT_ANSWER)) && !may_keep("token", (ok, MAX_KEPT_ANSWER + 1)));
        assert!(may_keep("token", (StatusCode::CONFLICT, 10)), "an operator's refusal is kept");
        assert!(!may_keep("shopper:12", (ok, MAX_KEPT_SHOPPER_ANSWER + 1)), "a shopper's long answer is a read");
        assert!(!may_keep("shopper:12", (StatusCode::CONFLICT, 10)), "a shopper's refusal did nothing");
    }

    #[test]
    fn fingerprints_tell_bodies_and_paths_apart() {
        assert_eq!(fingerprint("POST", "/api/grab", b"{}"), fingerprint("POST", "/api/grab", b"{}"));
        assert_ne!(fingerprint("POST", "/api/grab", b"{}"), fingerprint("POST", "/api/grab", b"{ }"));
        assert_ne!(fingerprint("POST", "/api/a", b"b/c"), fingerprint("POST", "/api/ab", b"/c"));
    }
}
