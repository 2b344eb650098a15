//! How a change to a live sale is made (`run`'s endpoints ask for them): in the
//! database first (the row's `version` bumped, decided again if another change came
//! first), then in Redis before the call answers (the window through `warm`, the stock
//! through `stock`), then announced to every process and written in the operator's
//! log. A change saved and not yet in Redis says so, and the sale's upkeep finishes it.

use super::{context::Context, launch::changed, refill, stock, warm, StockChanged};
use crate::{
    audit::store::{self as audit, Record},
    auth::{
        caller::{operator, ForOperators},
        session::Actor,
    },
    backend::{Backend, BackendError},
    error::{AppError, AppResult, ErrorCode},
    voucher::{
        ledger,
        left::units_left,
        rules,
        store::{self, Edit, VoucherRow},
        Voucher, MAX_STOCK, MOST_STOCK_CHANGES,
    },
};

/// An `update_voucher` request, as sent.
pub(super) struct EditRequest {
    pub(super) title: Option<String>,
    pub(super) price: Option<i64>,
    pub(super) face_value: Option<i64>,
    pub(super) begins_at: Option<String>,
    pub(super) ends_at: Option<String>,
}

impl EditRequest {
    /// The change this request makes to `row`, at `now` (the gate's clock, Unix ms).
    pub(super) fn check(&self, row: &VoucherRow, now: i64) -> AppResult<Edit> {
        not_ended(row, now)?;
        let title = self.title.as_deref().map(rules::title).transpose()?;
        let (price, face_value) = (self.price.unwrap_or(row.price), self.face_value.unwrap_or(row.face_value));
        rules::amounts(price, face_value)?;
        let ms = |field, value: &Option<String>| {
            value.as_deref().map(|v| rules::time(field, v).map(|t| t.timestamp_millis())).transpose()
        };
        let (begins_at, ends_at) = (ms("begins_at", &self.begins_at)?, ms("ends_at", &self.ends_at)?);
        if begins_at.is_some_and(|b| b != row.begins_at) && now >= row.begins_at {
            return Err(ErrorCode::SaleStarted.into());
        }
        // A window sent is checked whole; its bounds as far as it changes them: a sale
        // made before they were set keeps its other fields editable, and may be
        // shortened.
        if begins_at.is_some() || ends_at.is_some() {
            let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
            let window = (begins_at.unwrap_or(row.begins_at), ends_at.unwrap_or(row.ends_at));
            rules::window(at(window.0), at(window.1), at(now))?;
            let longer = window.1 - window.0 > row.ends_at - row.begins_at;
            let moved = window.0 != row.begins_at;
            rules::bounds((at(window.0), at(window.1)), at(now), (longer, moved))?;
        }
        Ok(Edit { title, price: self.price, face_value: self.face_value, begins_at, ends_at, paused: None })
    }
}

/// Refuses changes to a sale that is over.
pub(super) fn not_ended(row: &VoucherRow, now: i64) -> AppResult<()> {
    if now >= row.ends_at {
        return Err(ErrorCode::Ended.into());
    }
    Ok(())
}

/// Attempts at a change while other changes of the same voucher keep coming first.
const ATTEMPTS: usize = 5;

/// Makes the change `decide` works out from the voucher's row and the gate's clock:
/// in the database (if the row is still what it was decided on; else decided again),
/// then in Redis, then announced and logged.
pub(super) async fn edit<F: ForOperators>(
    action: &'static str,
    voucher_id: i64,
    decide: impl Fn(&VoucherRow, i64) -> AppResult<Edit>,
) -> AppResult<Voucher> {
    let state = Context::get();
    let actor = operator::<F>()?;
    let backend = &state.backend;
    for _ in 0..ATTEMPTS {
        let before = store::get(&backend.db, voucher_id).await?.ok_or(ErrorCode::UnknownVoucher)?;
        let edit = decide(&before, super::gate::clock(backend, Some(voucher_id)).await?)?;
        let Some(after) = store::edit(&backend.db, voucher_id, before.version, &edit).await? else { continue };
        let pushed = warm::warm_change(backend, &after).await;
        // A start moved later, judged after the push (or its failure: then every
        // process's upkeep would push it later still).
        if after.begins_at > before.begins_at && started(backend, &before).await {
            return undo_late_start_move(&state, (&actor, action), &before, (&after, pushed)).await;
        }
        if let Err(e) = pushed {
            return Err(saved_not_applied(&state, &actor, action, &before, e.into()).await);
        }
        let after = if after.ends_at < before.ends_at { end_as_made(backend, &before, after).await } else { after };
        return done(&state, &actor, action, &before, &after).await;
    }
    Err(AppError::with(ErrorCode::Unavailable, "Other changes of this sale keep coming; try again."))
}

/// An end moved earlier (`end_sale`, or an edit) is made when it reaches Redis: the
/// gate granted until then, past the end the row names if the database's write or
/// Redis stalled (as a start move was held up, 2026-11-30). Held up by more than
/// [`END_HELD_UP`], the end is recorded as made (the gate's clock after the push, but
/// never past the old end, where the gate stopped anyway; a new version, pushed too),
/// so that no order comes after its sale's end. Unchanged when the gate could not have
/// granted meanwhile (paused, or the old start still ahead), when its clock does not
/// answer, or when another change came first (it is the sale's now).
async fn end_as_made(backend: &Backend, before: &VoucherRow, after: VoucherRow) -> VoucherRow {
    let Ok(now) = super::gate::clock(backend, Some(after.id)).await else { return after };
    let made_at = now.min(before.ends_at);
    if made_at <= after.ends_at + END_HELD_UP || now <= before.begins_at || before.paused != 0 {
        return after;
    }
    let made = Edit { ends_at: Some(made_at), ..Edit::default() };
    match store::edit(&backend.db, after.id, after.version, &made).await {
        Ok(Some(row)) => {
            if let Err(e) = warm::warm_change(backend, &row).await {
                tracing::warn!(voucher = row.id, "an end recorded as made: not yet in Redis: {e}");
            }
            row
        }
        _ => after,
    }
}

/// How long (ms) an end moved earlier may be held up on its way to the gate and still be
/// recorded as asked: orders carry their second only, and a second push of every
/// bucket for less would cost more than it tells.
const END_HELD_UP: i64 = 1_000;

/// Whether `row`'s start has passed: by the gate's clock, or the database's when Redis
/// does not answer (Redis granted, or will grant, by its own). Neither answering: not
/// known, taken as not passed.
async fn started(backend: &Backend, row: &VoucherRow) -> bool {
    let now = match super::gate::clock(backend, Some(row.id)).await {
        Ok(now) => Ok(now),
        Err(_) => crate::backend::db_clock::now_ms(&backend.db).await,
    };
    matches!(now, Ok(now) if now >= row.begins_at)
}

/// Undoes a change that moved a sale's start later and reached Redis only after the
/// old start had passed (its database write or Redis stalled: an attack held SQLite's
/// lock over the start, 2026-11-30): shoppers may have been granted under the old
/// start, and no order may come before the sale's start. (A start moved earlier, as
/// `end_sale` moves one, puts no order before it.) The row gets its fields back as
/// they were (a new version, pushed to Redis and announced) and the change is refused
/// `sale_started`, as it was decided too late: nothing changed, so nothing is logged.
/// Should another change have come in between, only the start is put back. Should the
/// undo fail, the change stands, and is answered and logged as made (`pushed`: whether
/// Redis has it; if not, it is saved, not applied).
async fn undo_late_start_move(
    state: &Context,
    (actor, action): (&Actor, &'static str),
    before: &VoucherRow,
    (after, pushed): (&VoucherRow, Result<bool, BackendError>),
) -> AppResult<Voucher> {
    let backend = &state.backend;
    let whole = Edit {
        title: Some(before.title.clone()),
        price: Some(before.price),
        face_value: Some(before.face_value),
        begins_at: Some(before.begins_at),
        ends_at: Some(before.ends_at),
        paused: None,
    };
    let start = Edit { begins_at: Some(before.begins_at), ..Edit::default() };
    let mut undo = (after.version, &whole);
    for _ in 0..ATTEMPTS {
        let undone = match store::edit(&backend.db, before.id, undo.0, undo.1).await {
            Ok(undone) => undone,
            Err(e) => {
                tracing::error!(voucher = before.id, "undoing a late start move: {e}");
                break;
            }
        };
        let Some(undone) = undone else {
            match store::get(&backend.db, before.id).await {
                Ok(Some(row)) if row.begins_at == after.begins_at => undo = (row.version, &start),
                _ => break,
            }
            continue;
        };
        if let Err(e) = warm::warm_change(backend, &undone).await {
            tracing::warn!(voucher = before.id, "a late start move, undone: not yet in Redis: {e}");
        }
        changed(state, before.id).await;
        tracing::warn!(voucher = before.id, %actor, action, "a start moved after it had passed: undone");
        return Err(ErrorCode::SaleStarted.into());
    }
    match pushed {
        Ok(_) => done(state, actor, action, before, after).await,
        Err(e) => Err(saved_not_applied(state, actor, action, before, e.into()).await),
    }
}

/// The units of a stock change as asked: 1 to [`MAX_STOCK`].
pub(super) fn checked_units(units: i64) -> AppResult<i64> {
    if !(1..=MAX_STOCK).contains(&units) {
        return Err(AppError::invalid(format!("Units must be between 1 and {MAX_STOCK}.")).on("units"));
    }
    Ok(units)
}

/// What an operator hears of a withdrawal saved and not yet made: Redis makes it within
/// seconds, of the units still unsold then, or not at all if a rebuild of the sale
/// comes first (it voids the withdrawals it finds owed). Unlike another change, the
/// outcome is not sure: the sale's stock says it.
const WITHDRAWAL_SAVED: &str = "Saved; Redis takes the units within seconds if they are still unsold then. \
     Check the sale's stock before withdrawing again.";

/// Adds (`units` > 0) or withdraws (< 0) stock.
pub(super) async fn change_stock<F: ForOperators>(
    action: &'static str,
    voucher_id: i64,
    units: i64,
) -> AppResult<StockChanged> {
    let state = Context::get();
    let actor = operator::<F>()?;
    let backend = &state.backend;
    let before = store::get(&backend.db, voucher_id).await?.ok_or(ErrorCode::UnknownVoucher)?;
    not_ended(&before, super::gate::clock(backend, Some(voucher_id)).await?)?;
    let over_the_cap = || AppError::invalid(format!("A sale has at most {MAX_STOCK} units.")).on("units");
    if before.stock + units > MAX_STOCK {
        return Err(over_the_cap());
    }
    // Read first so that a refused withdrawal gathers no units; the ledger counts
    // again under the voucher's lock, where calls made at once meet.
    if ledger::operator_changes(&backend.db, voucher_id).await? >= MOST_STOCK_CHANGES {
        return Err(ErrorCode::StockChangeLimit.into());
    }
    let refused = |why| match why {
        // Another addition took the sale past the cap meanwhile.
        ledger::Refused::StockCap => over_the_cap(),
        ledger::Refused::ChangeCap => ErrorCode::StockChangeLimit.into(),
    };
    let made = if units > 0 {
        let changes = ledger::add_stock(&backend.db, voucher_id, units, MAX_STOCK).await?.map_err(refused)?.0;
        finish_all(backend, &changes).await
    } else {
        withdraw(backend, &before, -units, refused).await?
    };
    let made = match made {
        Ok(made) => made,
        Err(e) => {
            let saved = saved_not_applied(&state, &actor, action, &before, e.into()).await;
            // A withdrawal is made only of units still unsold when Redis takes it.
            return Err(if units < 0 { AppError::with(ErrorCode::SavedNotApplied, WITHDRAWAL_SAVED) } else { saved });
        }
    };
    if made.recorded == 0 {
        if made.redis != 0 || made.rebuilt {
            let message = "The sale was rebuilt meanwhile and nothing was withdrawn; try again.";
            return Err(AppError::with(ErrorCode::Unavailable, message));
        }
        return Err(ErrorCode::NotEnoughStock.into());
    }
    if units > 0 {
        // Here at once; every other process when it hears the restock, or else when it
        // next reads the sale-change count `done` bumps.
        state.sold_out.clear(voucher_id);
    }
    // Made: no answer from here on may read as one that did nothing (`unavailable`
    // lets an Idempotency-Key go, and the keyed retry would make the change again; a
    // review, 2026-12-02).
    let Ok(Some(after)) = store::get(&backend.db, voucher_id).await else {
        return Err(AppError::with(ErrorCode::SavedNotApplied, MADE_NOT_READ));
    };
    let voucher = done(&state, &actor, action, &before, &after).await?;
    Ok(StockChanged { units: made.recorded.abs(), voucher })
}

/// What an operator hears of a stock change made whose sale could not be read back.
const MADE_NOT_READ: &str = "Made, but the sale could not be read back just now: read it to see its stock, \
     and do not send the change again.";

/// Makes `changes` in Redis, in turn; what they made, summed. A failure stops there:
/// the rest are owed, and the upkeep makes them.
async fn finish_all(backend: &Backend, changes: &[ledger::StockChange]) -> Result<stock::Made, BackendError> {
    let mut made = stock::Made::default();
    for change in changes {
        let one = stock::finish(backend, change).await?;
        (made.recorded, made.redis) = (made.recorded + one.recorded, made.redis + one.redis);
        made.rebuilt |= one.rebuilt;
    }
    Ok(made)
}

/// Withdraws `units` of `before`'s sale, all or none, in one Redis step. From a sale of
/// several shards the units are gathered in bucket 0 first (moves, which sell nothing),
/// then withdrawn there; grabs of bucket 0's shoppers can take some of them between
/// the two, and the withdrawal, finding bucket 0 short, makes nothing though the sale
/// holds plenty (an attack, 2026-11-30: 300 of 800 unsold refused `not_enough_stock`
/// in 2 runs of 6 at 400 grabs a second). So it is gathered and asked again while the
/// sale holds enough, at most [`WITHDRAWAL_ROUNDS`] times (each round's withdrawal
/// that made nothing is one of the sale's stock changes), and then refused
/// `unavailable`, not `not_enough_stock`: the units were there.
async fn withdraw(
    backend: &Backend,
    before: &VoucherRow,
    units: i64,
    refused: impl Fn(ledger::Refused) -> AppError,
) -> AppResult<Result<stock::Made, BackendError>> {
    let (voucher_id, shards) = (before.id, before.shards());
    for _ in 0..WITHDRAWAL_ROUNDS {
        // Too few in the sale: withdrawn from bucket 0 all the same, and refused there.
        let gathered = shards == 1 || refill::gather(backend, voucher_id, shards, units).await? >= units;
        let change = ledger::owe_withdrawal(&backend.db, voucher_id, units).await?.map_err(&refused)?;
        let made = finish_all(backend, std::slice::from_ref(&change)).await;
        let taken_meanwhile = matches!(made, Ok(m) if m == stock::Made::default()) && gathered && shards > 1;
        if !taken_meanwhile {
            return Ok(made);
        }
    }
    let message = "Grabs kept taking the units as they were gathered for the withdrawal; try again.";
    Err(AppError::with(ErrorCode::Unavailable, message))
}

/// Tries a withdrawal from a sale of several shards makes ([`withdraw`]).
const WITHDRAWAL_ROUNDS: u32 = 3;

/// A change the database holds but Redis could not be given now: the upkeep of every
/// process gives it within seconds (a window by its version, a stock change because it
/// is owed). It is announced and logged like any other; the operator is told it is
/// saved, so as not to send it again.
async fn saved_not_applied(
    state: &Context,
    actor: &Actor,
    action: &'static str,
    before: &VoucherRow,
    error: AppError,
) -> AppError {
    tracing::warn!(voucher = before.id, action, "sale change saved, not yet in Redis: {}", error.message);
    if let Ok(Some(after)) = store::get(&state.backend.db, before.id).await {
        let _ = done(state, actor, action, before, &after).await;
    }
    AppError::new(ErrorCode::SavedNotApplied)
}

/// Tells every process, logs the change, and answers the voucher as it is now.
async fn done(
    state: &Context,
    actor: &Actor,
    action: &'static str,
    before: &VoucherRow,
    after: &VoucherRow,
) -> AppResult<Voucher> {
    changed(state, after.id).await;
    // The change is made: it is logged whatever Redis answers (the database's count
    // stands in for one not read).
    let left = units_left(&state.backend, std::slice::from_ref(after)).await;
    let left = left.ok().and_then(|left| left.first().copied()).unwrap_or(after.stock_left);
    // Before: units left as the database counted them (Redis has moved on).
    let (old, new) = (before.to_voucher(before.stock_left), after.to_voucher(left));
    tracing::info!(voucher = after.id, %actor, action, "sale changed");
    let json = |v: &Voucher| Some(serde_json::to_value(v).unwrap_or_default());
    let record =
        Record { actor: actor.name(), action, voucher_id: Some(after.id), before: json(&old), after: json(&new) };
    audit::record(&state.backend.db, record).await;
    Ok(new)
}
