//! Warm-up (`lua/warm.lua`): makes Redis hold a sale as the database has it. One
//! script, three uses: [`warm`] loads a sale Redis does not hold (its units left,
//! buyers, window and the order stream's consumer group), and rebuilds one Redis
//! lost from the database; on a sale Redis holds, it pushes the latest window (times,
//! pause, price). An operator's change calls [`warm_change`] ([`warm`], waiting for
//! replicas; the sale may have been lost meanwhile); the upkeep calls
//! [`push_window`], which only pushes.
//! This module owns the script's interface.
//!
//! A sale of K shards is K buckets in Redis (`backend::layout`), each warmed, rebuilt
//! and pushed on its own, from the database's account of that bucket
//! (`orders::snapshot::lock_for_rebuild`): a node that lost one bucket costs that bucket
//! a rebuild, and the others go on selling.

use crate::{
    backend::{
        invoke_then_wait,
        layout::{expires_at, last_sale, SaleKeys, GROUP, REBUILD_DEADLINE},
        layout_version::{refused_layout, LAYOUT_VERSION},
        Backend, BackendError, RedisConn, Replicas, ScriptCall, Tx,
    },
    orders::{
        results::StoredResult,
        snapshot::{self, RebuildSource},
    },
    voucher::store::{self, VoucherRow},
};
use redis::{RedisError, RedisResult};
use std::time::Duration;
use tokio::time::Instant;

/// How long past its ticket's deadline a rebuild that got no answer keeps the lock:
/// room for Redis's clock running a little slower than this process's.
const TICKET_MARGIN: Duration = Duration::from_millis(250);

/// What `lua/warm.lua` answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Warmed {
    /// Redis held the voucher whole (nothing loaded).
    Held,
    /// Redis did not hold it (the snapshot, if sent, loaded).
    Missing,
    /// Redis did not hold it, and the snapshot came after its ticket lapsed: nothing loaded.
    TooLate,
}

/// Loads the voucher into Redis unless Redis already holds it whole (stock, window, and
/// the order stream with the workers' group). Returns true when it loaded it (rebuilt
/// it). Stock, buyers and results are rebuilt from the database, so a Redis that lost
/// its data, or part of a sale's keys, comes back with what was persisted; a Redis
/// that kept it is left alone.
///
/// The database can lag Redis by orders a worker holds but has not committed. The
/// rebuild reads its snapshot and loads Redis under the database's write lock on the
/// voucher, so each such order commits either before (the snapshot has it) or after
/// Redis holds the rebuilt voucher, where settling it takes its unit and buyer slot
/// (`orders::settle`). Stock Redis and the database agree on either way.
///
/// Every bucket of a sale of several shards, in turn: true when it rebuilt any.
pub async fn warm(backend: &Backend, v: &VoucherRow) -> Result<bool, BackendError> {
    warm_all_buckets(backend, v, false).await
}

/// [`warm`] for one bucket of the sale alone (a worker's reader joining its bucket's
/// stream): a node down with another bucket must not keep this one's reader out.
pub async fn warm_one(backend: &Backend, v: &VoucherRow, bucket: u32) -> Result<bool, BackendError> {
    crate::voucher::buckets::noted(backend, v);
    warm_bucket(backend, (v, ended(backend, v).await), (bucket, false)).await
}

/// [`warm`] after an operator's change of the sale (a pause, an end, an edit): each
/// bucket's window push then waits, in the same pipeline, for the replicas required
/// ([`push_and_wait`]). Only here: a worker joining, or a grab rebuilding a sale Redis
/// lost, must go on while a replica is away.
pub async fn warm_change(backend: &Backend, v: &VoucherRow) -> Result<bool, BackendError> {
    warm_all_buckets(backend, v, true).await
}

/// [`warm`], waiting for replicas after each window push when `wait`. A bucket that
/// fails (its node down, its replicas behind) does not keep the others from the
/// change: a pause or an end must reach every gate it can. Every bucket is tried, then
/// the first failure is told (the operator hears the change is saved, not applied, and
/// the upkeep pushes it again).
async fn warm_all_buckets(backend: &Backend, v: &VoucherRow, wait: bool) -> Result<bool, BackendError> {
    crate::voucher::buckets::noted(backend, v);
    let ended = ended(backend, v).await;
    let (mut rebuilt, mut failed) = (false, None);
    for bucket in v.buckets() {
        match warm_bucket(backend, (v, ended), (bucket, wait)).await {
            Ok(one) => rebuilt |= one,
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    failed.map_or(Ok(rebuilt), Err)
}

/// Whether a sale of several shards is over by the gate's clock (the node of its
/// bucket 0, which operators' changes are decided by): each bucket's window then
/// names the end it is over at (`ended`), and every bucket's gate refuses while that
/// is its end, whatever its own node's clock says. A node whose clock lags would
/// otherwise grant for that lag after an operator's `end_sale` returned. A flag judged
/// from a row since changed (an end moved later as the old one passed) names an end
/// the window no longer has, so it refuses nothing. A sale of one shard has the one
/// clock and needs no flag. A clock that cannot be read says nothing: bucket 0's node
/// down must not stop the other buckets' rebuilds, and the upkeep pushes again within
/// a round.
async fn ended(backend: &Backend, v: &VoucherRow) -> bool {
    if v.shards() <= 1 {
        return false;
    }
    matches!(super::gate::clock(backend, Some(v.id)).await, Ok(now) if now >= v.ends_at)
}

/// [`warm`] for one bucket of the sale (waiting for replicas after the window's push
/// when `wait`).
async fn warm_bucket(
    backend: &Backend,
    (v, ended): (&VoucherRow, bool),
    (bucket, wait): (u32, bool),
) -> Result<bool, BackendError> {
    let keys = backend.bucket_keys(v.bucket(bucket));
    let mut redis = backend.redis.clone();
    // Most warm-ups find Redis holding the voucher whole: they need no snapshot, and
    // no database lock (a worker must be able to join while the database cannot write).
    let held = match wait {
        true => push_and_wait(backend, &keys, (v, ended)).await?,
        false => run_script(backend, &mut redis, &keys, (v, ended)).await?,
    };
    if held {
        return Ok(false);
    }
    // On a task of its own: a caller that goes away (a request past its timeout, a
    // client that hung up) must not drop the transaction, and with it the lock, while
    // the load may still reach Redis.
    let (backend, v) = (backend.clone(), v.clone());
    let rebuilt = tokio::spawn(async move { rebuild(&backend, &mut redis, (&keys, bucket), (&v, ended)).await }).await;
    rebuilt.unwrap_or_else(|e| match e.try_into_panic() {
        Ok(panic) => std::panic::resume_unwind(panic),
        Err(_) => Err(timed_out().into()), // the runtime is stopping
    })
}

/// Loads the database's snapshot of one bucket into Redis under the voucher's lock,
/// unless Redis holds the bucket whole by then. True when it loaded it.
///
/// A load sent cannot be called back: one that reaches Redis after the rebuild gave
/// up (a slow or cut link) would load a snapshot older than what was committed once
/// the lock was let go (a cancel whose give-back Redis recorded meanwhile, undone).
/// So the rebuild first sets a ticket that Redis lets lapse at [`REBUILD_DEADLINE`],
/// and the load counts only while the ticket holds: a rebuild without its answer
/// keeps the lock until the ticket surely lapsed, and after that no load of it can
/// load anything.
///
/// It counts itself on the voucher's row in the same transaction, before the snapshot:
/// a worker that read a batch from the stream Redis lost and commits it after the
/// snapshot reads the new count, and puts the batch on record until Redis settles it
/// (`orders::unsettled`). The count stands whenever the load may have run, even when
/// what the snapshot wrote does not (those writes are a savepoint of their own).
async fn rebuild(
    backend: &Backend,
    redis: &mut RedisConn,
    (keys, bucket): (&SaleKeys, u32),
    (v, ended): (&VoucherRow, bool),
) -> Result<bool, BackendError> {
    mark_loaded(backend, redis, v.id).await;
    let mut tx = backend.db.begin().await?;
    store::count_rebuild(&mut tx, v.id).await?;
    let mut taken = sqlx::Acquire::begin(&mut *tx).await?;
    let Some(snapshot) = snapshot::lock_for_rebuild(&mut taken, v.id, (bucket, v.shards())).await? else {
        return Ok(false);
    };
    let ticket = hex::encode(rand::random::<[u8; 16]>());
    let lapses =
        tokio::time::timeout(REBUILD_DEADLINE, issue_ticket(redis, keys, &ticket)).await.map_err(|_| timed_out())??;
    let answered = tokio::time::timeout(
        REBUILD_DEADLINE,
        call_script(backend, redis, keys, (v, ended), Some((&snapshot, &ticket))),
    )
    .await;
    let load = match answered {
        // Redis holds the snapshot: the withdrawals it voided are recorded so.
        Ok(Ok(Warmed::Missing)) => Load::Ran,
        // Redis held the voucher: loaded by this rebuild's own call, whose answer was
        // lost and which, sent again, found it held (then what it voided stands), or
        // by another rebuild that came first (then nothing of this snapshot was
        // taken, and nothing it voided may stand). Not knowing which, it may have run:
        // its count stands.
        Ok(Ok(Warmed::Held)) => match loaded_by(redis, keys, &ticket).await {
            Some(true) => Load::Ran,
            Some(false) => Load::Another,
            None => Load::Failed(timed_out()),
        },
        // The ticket was gone: nothing loaded, unless a first run of this call (its
        // answer lost) loaded part of it and failed.
        Ok(Ok(Warmed::TooLate)) => Load::Failed(timed_out()),
        // Redis answered with an error: the load was refused or ran (in part), and
        // will not run later.
        Ok(Err(e)) if e.code().is_some() => Load::Failed(e),
        failed => {
            // No answer: the load may still reach Redis, so the lock stays until it can
            // load nothing; then whether it loaded decides what its database half does.
            tokio::time::sleep_until(lapses).await;
            match failed {
                _ if loaded_by(redis, keys, &ticket).await == Some(true) => Load::Ran,
                Ok(Err(e)) => Load::Failed(e),
                _ => Load::Failed(timed_out()),
            }
        }
    };
    match load {
        Load::Ran => {
            taken.commit().await?;
            tx.commit().await?;
            Ok(true)
        }
        Load::Another => {
            drop(taken);
            tx.rollback().await?;
            Ok(false)
        }
        // What the snapshot wrote is rolled back; the count stands, as the load may
        // have run in part.
        Load::Failed(e) => {
            if taken.rollback().await.is_ok() {
                keep_the_count(tx).await;
            }
            Err(e.into())
        }
    }
}

/// What became of a rebuild's load, which decides what its database half does.
enum Load {
    /// It loaded the snapshot: what the snapshot wrote stands.
    Ran,
    /// Redis held the bucket, loaded by another rebuild: nothing stands.
    Another,
    /// It failed, and may have run in part, or whether it ran is not known: its count
    /// stands.
    Failed(RedisError),
}

/// Commits a rebuild's count (what its snapshot wrote rolled back), when its load may
/// have run though it failed. A database failing then is logged, not answered: the
/// rebuild's own failure (Redis's refusal of a layout, a timeout) is what its caller
/// must hear.
async fn keep_the_count(tx: Tx<'_>) {
    if let Err(e) = tx.commit().await {
        tracing::warn!("a rebuild's count not kept: {e}");
    }
}

/// Whether the rebuild of `ticket` loaded the bucket (the window's `rebuilt_by`, which
/// its load writes). Asked once its answer was lost or found the bucket held, and no
/// load of it can run any more; asked again, on what may be a new connection, until
/// [`REBUILD_DEADLINE`] has passed: `None` when Redis has not answered by then.
async fn loaded_by(redis: &mut RedisConn, keys: &SaleKeys, ticket: &str) -> Option<bool> {
    let give_up = Instant::now() + REBUILD_DEADLINE;
    loop {
        let mut ask = redis::cmd("HGET");
        ask.arg(&keys.window).arg("rebuilt_by");
        let why = match tokio::time::timeout_at(give_up, ask.query_async::<Option<String>>(redis)).await {
            Ok(Ok(by)) => return Some(by.as_deref() == Some(ticket)),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "Redis did not answer".to_owned(),
        };
        if Instant::now() + ASK_AGAIN >= give_up {
            tracing::warn!("rebuild: asking whether its load ran: {why}");
            return None;
        }
        tokio::time::sleep(ASK_AGAIN).await;
    }
}

/// How long a rebuild waits to ask again whether its load ran, after Redis failed to
/// answer.
const ASK_AGAIN: Duration = Duration::from_millis(100);

/// Sets the bucket's ticket for a load: answers the moment by which Redis has surely
/// let it lapse (it was set before this answer came).
async fn issue_ticket(redis: &mut RedisConn, keys: &SaleKeys, ticket: &str) -> RedisResult<Instant> {
    let mut set = redis::cmd("SET");
    set.arg(&keys.rebuild).arg(ticket).arg("PX").arg(REBUILD_DEADLINE.as_millis() as u64);
    let () = set.query_async(redis).await?;
    Ok(Instant::now() + REBUILD_DEADLINE + TICKET_MARGIN)
}

fn timed_out() -> RedisError {
    RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut))
}

/// Runs `lua/warm.lua`. With a snapshot (and its ticket), loads its stock, buyers and
/// results and the window unless Redis holds the voucher whole (stock, window, the
/// stream's group), as long as the bucket's ticket is that one; without, only looks.
/// Either way, when Redis holds the voucher, refreshes its window from `v` (unless
/// Redis holds a newer version of it), marks it over at its end when `ended` ([`ended`]), and
/// makes every key of the sale expire at [`expires_at`] its end.
async fn call_script(
    backend: &Backend,
    redis: &mut RedisConn,
    keys: &SaleKeys,
    window: (&VoucherRow, bool),
    snapshot: Option<(&RebuildSource, &str)>,
) -> RedisResult<Warmed> {
    let code: i64 = warm_call(backend, keys, window, snapshot).invoke(redis).await.inspect_err(|e| {
        noted_layout(backend, window.0.id, e);
    })?;
    Ok(Warmed::of(code))
}

/// The call of `lua/warm.lua` [`call_script`] makes.
fn warm_call<'a>(
    backend: &'a Backend,
    keys: &SaleKeys,
    (v, ended): (&VoucherRow, bool),
    snapshot: Option<(&RebuildSource, &str)>,
) -> ScriptCall<'a> {
    let keys = [
        &*keys.left,
        &keys.buyers,
        &keys.window,
        &keys.orders,
        &keys.results,
        &keys.dlq,
        &keys.refused,
        &keys.given_back,
        &keys.changes,
        &keys.rebuild,
    ];
    let loaded =
        snapshot.map_or(0, |(s, _)| 5 + 2 * (s.buyers.len() + s.orders.len() + s.changes.len()) + s.given_back.len());
    // About 20 bytes an argument.
    let mut call = ScriptCall::new(&backend.scripts.warm, &keys, 12 + loaded, 256 + 20 * loaded);
    call.arg(v.begins_at).arg(v.ends_at).arg(expires_at(v.ends_at)).arg(v.paused).arg(v.price).arg(v.version);
    call.arg(v.fair_start).arg(&v.start_secret).arg(GROUP).arg(v.shards()).arg(LAYOUT_VERSION);
    call.arg(if ended { v.ends_at.to_string() } else { String::new() });
    if let Some((s, ticket)) = snapshot {
        call.arg(ticket).arg(s.stock_left).arg(s.buyers.len()).arg(s.given_back.len()).arg(s.orders.len());
        call.arg(&s.buyers).arg(&s.given_back);
        for &(order, user) in &s.orders {
            call.arg(order).arg(StoredResult::Success { user_id: user }.encode());
        }
        for (change, units) in &s.changes {
            call.arg(change).arg(units);
        }
    }
    call
}

/// Notes a sale Redis holds in a newer layout than this process speaks.
fn noted_layout(backend: &Backend, voucher_id: i64, e: &RedisError) {
    if let Some(theirs) = refused_layout(e) {
        backend.newer_layouts.met(voucher_id, theirs);
    }
}

impl Warmed {
    /// What the script's answer says.
    fn of(code: i64) -> Self {
        match code {
            1 => Self::Held,
            2 => Self::TooLate,
            _ => Self::Missing,
        }
    }
}

/// [`run_script`], then, in the same pipeline, a wait for the replicas required to
/// hold the window (`SECKILL_WAIT_REPLICAS`): what [`warm_change`] does first, after
/// every operator's change. A replica promoted before it had a pause or an end would
/// otherwise reopen the sale until the upkeep pushed the window again. Fails when the
/// replicas fall short (the operator hears `saved_not_applied`). The upkeep's own
/// pushes ([`push_window`]) do not wait: they come again every round. On the
/// connection of the waits (`Backend::waits`): grabs never queue behind one.
async fn push_and_wait(backend: &Backend, keys: &SaleKeys, window: (&VoucherRow, bool)) -> Result<bool, BackendError> {
    let Replicas { want, wait_ms } = backend.replicas;
    let redis = &mut backend.waits.clone();
    if want == 0 {
        return Ok(run_script(backend, redis, keys, window).await?);
    }
    let call = warm_call(backend, keys, window, None);
    let (codes, have): (Vec<i64>, u32) = invoke_then_wait(&[call], redis, want, wait_ms).await.inspect_err(|e| {
        noted_layout(backend, window.0.id, e);
    })?;
    let held = codes.first().copied().map(Warmed::of) == Some(Warmed::Held);
    if held && have < want {
        return Err(BackendError::ReplicasBehind { have, want });
    }
    Ok(held)
}

/// Looks whether Redis holds the bucket whole, and pushes `v`'s window to it if so
/// ([`call_script`] without a snapshot). True when it holds it.
pub async fn run_script(
    backend: &Backend,
    redis: &mut RedisConn,
    keys: &SaleKeys,
    window: (&VoucherRow, bool),
) -> RedisResult<bool> {
    Ok(call_script(backend, redis, keys, window, None).await? == Warmed::Held)
}

/// Loads `snapshot` into the bucket unless Redis holds it whole, without the
/// database's lock (a drill's; [`rebuild`] holds it). True when Redis held it.
pub async fn load(
    backend: &Backend,
    redis: &mut RedisConn,
    keys: &SaleKeys,
    v: &VoucherRow,
    snapshot: &RebuildSource,
) -> RedisResult<bool> {
    let ticket = hex::encode(rand::random::<[u8; 16]>());
    issue_ticket(redis, keys, &ticket).await?;
    Ok(call_script(backend, redis, keys, (v, false), Some((snapshot, &ticket))).await? == Warmed::Held)
}

/// Pushes `v`'s window to every bucket of its sale Redis holds (an older push never
/// overwrites a newer one: the row's `version` decides); only looks at one Redis
/// lost, which a grab or the worker rebuilds. True when Redis holds them all. Every
/// push runs to its end whatever the others meet (one node down must not hold back
/// the others' gates); the first failure is answered then.
pub async fn push_window(backend: &Backend, v: &VoucherRow) -> RedisResult<bool> {
    crate::voucher::buckets::noted(backend, v);
    let ended = ended(backend, v).await;
    let pushes = v.buckets().map(|b| async move {
        run_script(backend, &mut backend.redis.clone(), &backend.bucket_keys(v.bucket(b)), (v, ended)).await
    });
    let held: RedisResult<Vec<bool>> = futures::future::join_all(pushes).await.into_iter().collect();
    Ok(held?.into_iter().all(|held| held))
}

/// How long a load waits to raise the mark of the sales Redis loaded ([`mark_loaded`]).
/// Short: a sale of several shards rebuilds its buckets in turn, each raising the mark,
/// and the mark's node may be the one that is down.
const MARK_DEADLINE: Duration = Duration::from_millis(500);

/// Raises Redis's mark of the highest sale id it loaded (`layout::last_sale`) to
/// `voucher_id`, before the load: every sale Redis holds is under the mark. A mark not
/// raised (its node down or slow) is only logged: it is a check for a mistaken restore,
/// and must not keep a sale from being loaded while one node of a cluster is away.
async fn mark_loaded(backend: &Backend, redis: &mut RedisConn, voucher_id: i64) {
    let raise = redis::cmd("ZADD").arg(last_sale(&backend.namespace)).arg("GT").arg(voucher_id).arg("last").to_owned();
    let raised = tokio::time::timeout(MARK_DEADLINE, raise.query_async::<()>(redis)).await;
    if let Some(e) = raised.map_err(|_| "no answer".to_owned()).and_then(|r| r.map_err(|e| e.to_string())).err() {
        tracing::warn!(voucher_id, "warm-up: could not raise Redis's mark of the sales it loaded: {e}");
    }
}

/// Ids past the database's last that [`from_a_later_database`] looks at: an id handed
/// out and never stored (a create that failed on PostgreSQL) leaves a gap of one.
/// (A Redis written before the mark, [`mark_loaded`], has none.)
const NEXT_IDS_LOOKED_AT: i64 = 4;

/// A sale Redis holds that the database has not made: Redis was written by a later
/// life of this database (restored from an older backup while Redis kept its keys) or
/// by another database given the same namespace. The database hands that id out
/// next, and the sale it makes would take over the old sale's keys: its stock,
/// buyers, and orders granted and never saved, which the worker would save as the
/// new sale's. Checked at start-up (`server`), which refuses to start on it: only
/// the sales the database holds may be rebuilt in Redis (docs/operations.md,
/// "Restoring the database"). A sale created meanwhile by a running process is in
/// the database before it is in Redis, and is looked up again: not taken for one.
///
/// Redis's mark of the highest sale it loaded decides first, against the last id the
/// database handed out: the mark outlives the sale's keys, which expire a day after
/// its end, so a backup weeks old is caught even when the newest sales' keys are gone
/// and an older one's are not; a row deleted by hand does not lower the database's
/// count, so it is not taken for a restore. The mark is read before the database: a
/// sale under it was stored before it was raised. Then the next few ids are looked at
/// (a Redis that has no mark yet).
pub async fn from_a_later_database(backend: &Backend) -> Result<Option<i64>, BackendError> {
    let mut redis = backend.redis.clone();
    let mark: Option<f64> = redis::AsyncCommands::zscore(&mut redis, last_sale(&backend.namespace), "last").await?;
    let last = store::last_handed_out(&backend.db).await?;
    if let Some(mark) = mark.map(|m| m as i64).filter(|&m| m > last) {
        return Ok(Some(mark));
    }
    for id in last + 1..=last + NEXT_IDS_LOOKED_AT {
        let held: bool =
            redis::AsyncCommands::exists(&mut redis, &SaleKeys::new(&backend.namespace, id).window).await?;
        if held && store::get(&backend.db, id).await?.is_none() {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

/// Warms every voucher whose sale is upcoming, running or just ended; one that fails
/// does not keep the others from it. How many warmed, and the first failure (an
/// error: the database did not list them).
pub async fn warm_all(backend: &Backend) -> Result<(usize, Option<BackendError>), BackendError> {
    let live = store::live(&backend.db, 0).await?;
    let (mut warmed, mut failed) = (0, None);
    for v in &live {
        match warm(backend, v).await {
            Ok(_) => warmed += 1,
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    Ok((warmed, failed))
}
