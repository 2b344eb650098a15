//! What `grab` and `grab_result` do. HTTP calls reach it through the plain axum routes
//! on their paths (`hot_path.rs`); the server functions (`api.rs`, the API the UI is
//! written against) run it too when called in-process. One code path for both.

use super::{
    context::Context,
    gate::{self, Verdict},
    refill::Refill,
    GrabState, GrabTicket, IssuedToken, Queued,
};
use crate::{
    backend::{outage::Throttle, Backend},
    bus::SaleEvent,
    error::{AppError, AppResult, ErrorCode},
    orders::{entry::OrderMsg, lifecycle, results::StoredResult, store, FailReason},
    report::Outcome,
};
use metrics::{Counter, Histogram};
use redis::AsyncCommands;
use std::{sync::OnceLock, time::Duration};

/// A grab's failures are said at most once a second (each grab fails while Redis is down).
static SAID: Throttle = Throttle::new();

/// Longest a grab waits on Redis before answering `unavailable`: a shopper must hear
/// back, and a Redis that has not answered by then is down or overloaded. (A grab the
/// gate decided just before the deadline still stands; asking again says so.)
pub const REDIS_DEADLINE: Duration = Duration::from_secs(2);

/// `user_id` tries to buy one unit of `voucher_id` (see `api::grab`), with their grab
/// token and whether it is sent `again`. Every answer is counted for the sale's report
/// (`report::tally`).
pub async fn grab(
    state: &Context,
    user_id: i64,
    voucher_id: i64,
    (token, again): (Option<&str>, bool),
) -> AppResult<GrabTicket> {
    // A stopping process takes no new orders; the client retries on another.
    if state.shutdown.is_shutdown() {
        return Err(refused(state, voucher_id, ErrorCode::Unavailable));
    }
    // The flag spares Redis a sold-out sale's storm of first tries. A grab sent again
    // (its first answer lost) goes to the gate, which tells a buyer their order: a
    // shopper's rate limit bounds what that costs.
    if !again && state.sold_out.refuse(voucher_id) {
        SOLD_OUT_LOCALLY.get_or_init(|| metrics::counter!("seckill_grabs_sold_out_locally_total")).increment(1);
        return Err(refused(state, voucher_id, ErrorCode::SoldOut));
    }
    // Past what this process can serve: shed now rather than queue (`admission`).
    let Some(admitted) = state.admission.try_admit() else {
        answered(&state.tally, voucher_id, Outcome::Shed);
        return Err(shed());
    };
    let answer = at_the_gate(state, (voucher_id, user_id), token).await;
    // The permit's clock times the gate: one clock read per grab, not two.
    let took = admitted.started().elapsed();
    GATE_SECONDS.get_or_init(|| metrics::histogram!("seckill_gate_seconds")).record(took);
    let outcome = answer.as_ref().map_or_else(|refused| Outcome::of_code(refused.code), |_| Some(Outcome::Granted));
    if let Some(outcome) = outcome {
        count(outcome);
    }
    state.tally.decided(voucher_id, outcome, took);
    answer
}

/// A grab answered `code`, counted for the report and the metric.
fn refused(state: &Context, voucher_id: i64, code: ErrorCode) -> AppError {
    if let Some(outcome) = Outcome::of_code(code) {
        answered(&state.tally, voucher_id, outcome);
    }
    code.into()
}

/// A grab of `voucher_id` answered `outcome` without the gate's deciding (here, or by
/// the front door's rate limit): counted for the report and the metric alike.
pub fn answered(tally: &crate::report::tally::Tally, voucher_id: i64, outcome: Outcome) {
    count(outcome);
    tally.answered(voucher_id, outcome);
}

/// An admitted grab at the gate, within [`REDIS_DEADLINE`].
async fn at_the_gate(
    state: &Context,
    (voucher_id, user_id): (i64, i64),
    token: Option<&str>,
) -> Result<GrabTicket, AppError> {
    let backend = &state.backend;
    let clears = state.sold_out.clears();
    let decide = async {
        // A block of ids is fetched (now and then) on a connection of its own: it waits
        // for replicas to hold the block (`order_ids`).
        let order_id = state.ids.next(&backend.id_blocks).await?;
        let (verdict, bucket) = in_bucket(state, voucher_id, (user_id, order_id), token.unwrap_or_default()).await?;
        Ok::<_, redis::RedisError>((order_id, verdict, bucket))
    };
    let decided = tokio::time::timeout(REDIS_DEADLINE, decide).await;
    let Ok(Ok((order_id, verdict, bucket))) = decided else {
        match decided {
            Ok(Err(e)) => {
                if let Some(left_out) = SAID.allow() {
                    tracing::warn!(voucher_id, left_out, "grab: {e}");
                }
            }
            _ => {
                if let Some(left_out) = SAID.allow() {
                    tracing::warn!(voucher_id, left_out, "grab: Redis did not answer within {REDIS_DEADLINE:?}");
                }
            }
        }
        return Err(ErrorCode::Unavailable.into());
    };
    if !matches!(verdict, Verdict::Granted) {
        state.ids.unused(order_id);
    }
    match verdict {
        Verdict::Dry | Verdict::Shards(_) | Verdict::Layout(_) => Err(ErrorCode::Unavailable.into()),
        Verdict::Granted => {
            state.bus.tell_here(&SaleEvent::Granted { voucher_id, bucket });
            let receipt = state.receipts.issue(user_id, voucher_id, order_id);
            Ok(GrabTicket { order_id: order_id.to_string(), status: Queued::Queued, receipt })
        }
        Verdict::Bought(held) => {
            // The gate found `held` in this shopper's slot: theirs, as a grant's id is.
            let receipt = state.receipts.issue(user_id, voucher_id, held);
            Err(AppError::new(ErrorCode::AlreadyBought).holding(held, receipt))
        }
        Verdict::Refused(ErrorCode::UnknownVoucher) => Err(not_in_redis(state, voucher_id).await.into()),
        Verdict::Refused(code) => {
            if code == ErrorCode::SoldOut {
                state.sold_out.set_unless_cleared(voucher_id, clears);
            }
            Err(code.into())
        }
    }
}

/// Decides `ask` in its shopper's bucket of the sale: asked with the shards this
/// process knows (1 for a sale it has not met: the bucket's window corrects it, once),
/// and, when the bucket ran dry while the sale has others, asked again once units
/// moved to it (`refill::refill`), until the grab's deadline; a sale found sold out
/// answers `sold_out`, a refill that failed `unavailable`. With the bucket it was
/// decided in. The grab is made for each asking (a retry is rare: the first costs what
/// a grab always did).
async fn in_bucket(
    state: &Context,
    voucher_id: i64,
    (user_id, order_id): (i64, i64),
    token: &str,
) -> redis::RedisResult<(Verdict, u32)> {
    let backend = &state.backend;
    let mut shards = backend.known_shards(voucher_id).unwrap_or(1);
    let mut learned = false;
    loop {
        let bucket = crate::backend::layout::bucket_of(user_id, shards);
        let sale = gate::Bucket { voucher_id, shards, bucket };
        let ask = gate::Ask { user_id, order_id, token: token.to_owned() };
        match state.batches.decide(backend, sale, ask).await? {
            Verdict::Shards(told) if !learned && told >= 1 => {
                backend.note_shards(voucher_id, told);
                (shards, learned) = (told, true);
            }
            Verdict::Shards(_) => return Ok((Verdict::Refused(ErrorCode::Unavailable), bucket)),
            Verdict::Layout(theirs) => {
                backend.newer_layouts.met(voucher_id, theirs);
                return Ok((Verdict::Refused(ErrorCode::Unavailable), bucket));
            }
            // Found sold out already (a refill's broadcast, and no restock since): a
            // grab sent `again`, which the flag does not refuse before the gate, is
            // not worth a refill each (the database read twice, every bucket read, the
            // sell-out published and written again).
            Verdict::Dry if state.sold_out.is_flagged(voucher_id) => {
                sold_out_after_refill(backend, sale);
                return Ok((Verdict::Refused(ErrorCode::SoldOut), bucket));
            }
            Verdict::Dry => {
                let refill = super::refill::refill(backend.clone(), voucher_id, shards, bucket);
                match state.refills.join((voucher_id, bucket), refill).await {
                    Some(Refill::Refilled) => {}
                    Some(Refill::SoldOut) => {
                        sold_out_after_refill(backend, sale);
                        return Ok((Verdict::Refused(ErrorCode::SoldOut), bucket));
                    }
                    Some(Refill::Failed) | None => return Ok((Verdict::Refused(ErrorCode::Unavailable), bucket)),
                }
            }
            verdict => {
                backend.newer_layouts.spoken(voucher_id);
                return Ok((verdict, bucket));
            }
        }
    }
}

/// A grab whose dry bucket was found sold out (by its refill, or by the flag a refill's
/// broadcast set): the gate answered it `dry`, so it is
/// counted as the gate's refusals are, for the dashboard, in a task of its own: the
/// grab's answer does not wait on a count (a lost count only makes the figure low, as
/// before; the report counts from the answers).
fn sold_out_after_refill(backend: &crate::backend::Backend, sale: gate::Bucket) {
    let backend = backend.clone();
    tokio::spawn(async move {
        let keys = backend.bucket_keys(sale);
        if let Err(e) = gate::count_refused(&backend, &keys, 1).await {
            tracing::debug!(voucher_id = sale.voucher_id, "counting a refusal after a refill: {e}");
        }
    });
}

/// What a call shed by admission control (`admission`) is told: it was not decided,
/// and may be sent again.
pub const SHED_MESSAGE: &str = "Busy; please try again in a moment.";

/// The answer to a call shed by admission control.
fn shed() -> AppError {
    AppError::with(ErrorCode::Unavailable, SHED_MESSAGE)
}

/// `user_id`'s grab token for `voucher_id` (see `api::grab_token`): a gate call like
/// a grab, so it is admitted (or shed) and bounded in time like one, and a sale Redis
/// lost is rebuilt as a grab would.
pub async fn grab_token(state: &Context, user_id: i64, voucher_id: i64) -> AppResult<IssuedToken> {
    let Some(_admitted) = state.admission.try_admit() else { return Err(shed()) };
    let asked = tokio::time::timeout(REDIS_DEADLINE, gate::token(&state.backend, voucher_id, user_id)).await;
    match asked {
        Ok(Ok(Ok(token))) => Ok(IssuedToken { token }),
        Ok(Ok(Err(ErrorCode::UnknownVoucher))) => Err(not_in_redis(state, voucher_id).await.into()),
        Ok(Ok(Err(code))) => Err(code.into()),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(ErrorCode::Unavailable.into()),
    }
}

/// The grab's metrics, each registered on first use and kept: by name and labels,
/// every record built a key with its labels and searched the registry with it (see
/// `server::monitoring::RouteMetrics`). First used in a serving process, after the recorder
/// is installed. `seckill_grabs_total` has one counter per answer (`Outcome`, the
/// report's columns too); refusals this process gave from its own sold-out flag are
/// also counted apart.
static GRABS: [OnceLock<Counter>; Outcome::ALL.len()] = [const { OnceLock::new() }; Outcome::ALL.len()];
static SOLD_OUT_LOCALLY: OnceLock<Counter> = OnceLock::new();
static GATE_SECONDS: OnceLock<Histogram> = OnceLock::new();

/// Counts one grab answered `outcome`.
fn count(outcome: Outcome) {
    let label = outcome.as_str();
    GRABS[outcome as usize].get_or_init(|| metrics::counter!("seckill_grabs_total", "outcome" => label)).increment(1);
}

/// The gate found no such voucher in Redis. Either there is no such sale, or Redis
/// lost it: restarted without its data, or a replica that never received the sale
/// took over from a dead master. The database decides. A sale still on is rebuilt now
/// (what a worker does when it finds the voucher gone, but without waiting for it),
/// once for all the grabs that ask meanwhile, and the shopper is told to try again,
/// not that the sale does not exist; a sale whose keys went with its end is `ended`.
async fn not_in_redis(state: &Context, voucher_id: i64) -> ErrorCode {
    let backend = state.backend.clone();
    state.rebuilds.join(voucher_id, rebuild(backend, voucher_id)).await.unwrap_or(ErrorCode::Unavailable)
}

/// Looks `voucher_id` up in the database and rebuilds it in Redis if its sale is on.
async fn rebuild(backend: Backend, voucher_id: i64) -> ErrorCode {
    let row = match crate::voucher::store::get(&backend.db, voucher_id).await {
        Ok(Some(row)) => row,
        Ok(None) => return ErrorCode::UnknownVoucher,
        Err(_) => return ErrorCode::Unavailable,
    };
    if chrono::Utc::now().timestamp_millis() >= row.ends_at {
        return ErrorCode::Ended;
    }
    if let Err(e) = crate::sale::warm::warm(&backend, &row).await {
        tracing::warn!(voucher_id, "grab: rebuilding a voucher Redis lost: {e}");
    }
    ErrorCode::Unavailable
}

/// Where `user_id`'s grab `order_id` stands (see `api::grab_result`). A grant neither
/// Redis nor the database knows is declared lost only to the shopper holding its
/// `receipt` (`receipt`): any other caller hears `unknown_order`, and nothing changes.
pub async fn grab_result(
    state: &Context,
    user_id: i64,
    voucher_id: i64,
    order_id: &str,
    receipt: Option<&str>,
) -> AppResult<GrabState> {
    let order_id = crate::order_ids::parse(order_id)?;
    let backend = &state.backend;
    let keys = crate::voucher::buckets::user_keys(backend, voucher_id, user_id).await?;
    let raw: Option<String> = backend.redis.clone().hget(&keys.results, order_id).await?;
    match raw.as_deref().and_then(StoredResult::parse) {
        Some(r) if r.user_id() != user_id => return Err(ErrorCode::UnknownOrder.into()),
        Some(StoredResult::Queued { .. }) => return Ok(GrabState::Queued),
        Some(StoredResult::Failed { reason, .. }) => return Ok(GrabState::Failed { reason }),
        // A success, or Redis forgot the result (it was rebuilt): the database knows.
        _ => {}
    }
    let order = lifecycle::get_for_user(&backend.db, order_id, user_id).await?.filter(|o| o.voucher_id == voucher_id);
    let saved = |order: crate::orders::Order| GrabState::Success { order: Box::new(order) };
    if let Some(order) = order {
        return Ok(saved(order));
    }
    // Buried (dead-lettered, or declared lost), or ended unsaved (the shopper held
    // another order, or no unit was left): that is the answer, read from the
    // database, which keeps it after Redis forgets the result (a rebuild loads the
    // results of stored orders only; a sale's keys expire a day after its end).
    let asked = OrderMsg { voucher_id, order_id, user_id, price: None };
    if let Some(reason) = store::burial(&backend.db, &asked).await? {
        return Ok(GrabState::Failed { reason });
    }
    if let Some(reason) = crate::orders::store::unsaved_ending(&backend.db, &asked).await? {
        return Ok(GrabState::Failed { reason });
    }
    let lost = raw.is_none()
        && receipt.is_some_and(|r| state.receipts.holds(user_id, voucher_id, order_id, r))
        && lost_by_redis(backend, voucher_id, order_id).await?;
    if !lost {
        return Err(ErrorCode::UnknownOrder.into());
    }
    // Decided for good before it is said: buried, so no worker saves it later.
    if store::bury_lost(&backend.db, &asked, FailReason::Lost.as_str()).await? {
        // Saved just before: the shopper's order after all.
        let order = lifecycle::get_for_user(&backend.db, order_id, user_id).await?;
        return order.map(saved).ok_or_else(|| ErrorCode::UnknownOrder.into());
    }
    // Buried now, or by a worker that gave up on it just before (its reason stands).
    let reason = store::burial(&backend.db, &asked).await?.unwrap_or(FailReason::Lost);
    Ok(GrabState::Failed { reason })
}

/// An order neither Redis nor the database knows, minted during the sale and not in
/// the future, asked about while Redis still keeps the sale: Redis lost it with its
/// data (emptied and rebuilt from the database, or a replica promoted before the grab
/// reached it). The gate writes every grant's result in the same step as the grant,
/// and it stays until the sale's keys expire, so a grant Redis still holds always has
/// one. Whether Redis holds another grant of the shopper's says nothing: one who
/// grabbed again after the loss holds a new one (a chaos run with a master cut off
/// found that answered `unknown_order`, the lost grab neither an order nor a
/// failure). Ids carry their grab's second; a second's slack covers the app's and
/// Redis's clocks. The window comes from the database, which Redis's losses do not
/// touch.
async fn lost_by_redis(backend: &Backend, voucher_id: i64, order_id: i64) -> AppResult<bool> {
    let Some(voucher) = crate::voucher::store::get(&backend.db, voucher_id).await? else { return Ok(false) };
    let now = chrono::Utc::now().timestamp_millis();
    let granted_at = crate::order_ids::decompose(order_id).0.timestamp_millis();
    let minted_in_sale = voucher.begins_at - 1_000 <= granted_at && granted_at <= voucher.ends_at.min(now) + 1_000;
    Ok(minted_in_sale && now <= crate::backend::layout::expires_at(voucher.ends_at))
}
