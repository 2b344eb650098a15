//! One sampler per process: a few times a second, every live voucher's figures
//! (`figures::read_each`: one SQL query and one Redis call per bucket, sent at once),
//! whatever the number of viewers, with rates since the last round, this process's
//! sold-out flags and its grabs admitted and shed, handed to the hub for every open
//! feed. No store holds a round up: the database's list and counters are waited for a
//! second, each bucket's figures and the gate's clock likewise, and what does not
//! answer is shown as it was last read, the snapshot saying since when
//! (`database_at_ms`, each sale's `redis_at_ms`): the board goes on while a store is
//! down, which is when its operator watches it most. The moments sales first sold
//! out, which the gate keeps in Redis, it hands to the report to keep
//! (`report::sell_outs`); a sale of several shards whose buckets read empty it asks
//! `sale::refill` about.

use super::{figures, hub::Hub, SaleFigures, Snapshot, VoucherLive};
use crate::{
    backend::{lone_task::LoneTask, outage::Outage, Backend, BackendError},
    report::sell_outs::SellOuts,
    sale::{admission::Admission, sold_out::SoldOutFlags},
    shutdown::{self, Shutdown},
    voucher::store::{self as vouchers, VoucherRow},
};
use std::{collections::HashMap, fmt::Write, future::Future, sync::Arc, time::Duration};

/// How often the numbers are read.
pub const EVERY: Duration = Duration::from_millis(250);
/// Vouchers stay on the dashboard this long after their sale ended.
const SHOWN_AFTER_END_MS: i64 = 10 * 60 * 1000;

/// Counters of the previous sample, for rates, and the units left it showed.
#[derive(Clone, Copy)]
struct Prev {
    /// When it was read, by this process's monotonic clock: the snapshot's own time
    /// is the gate's when Redis answers and this process's when not, and rates
    /// between the two would read a skew between the clocks as elapsed time.
    read_at: std::time::Instant,
    left: i64,
    granted: i64,
    persisted: i64,
    refused: i64,
    refused_locally: u64,
}

pub fn spawn(
    backend: Backend,
    hub: Arc<Hub>,
    (flags, admission): (Arc<SoldOutFlags>, Arc<Admission>),
    shutdown: Shutdown,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut last = Last::default();
        let mut sell_outs = SellOuts::default();
        // This process's admitted and shed grabs at the last sample, and when.
        let mut gate_before = (std::time::Instant::now(), admission.counts());
        let mut ticks = shutdown::interval(EVERY);
        let (mut database, mut redis) = (Outage::default(), Outage::default());
        while shutdown.tick(&mut ticks).await {
            let round = sample(&backend, &flags, &mut last, &mut sell_outs).await;
            database.note(&"live sampler: the database", &round.database);
            redis.note(&"live sampler: Redis", &round.redis);
            if let Some(mut snapshot) = round.snapshot {
                let now = (std::time::Instant::now(), admission.counts());
                let secs = now.0.duration_since(gate_before.0).as_secs_f64().max(0.001);
                snapshot.admitted_per_s = now.1 .0.saturating_sub(gate_before.1 .0) as f64 / secs;
                snapshot.shed_per_s = now.1 .1.saturating_sub(gate_before.1 .1) as f64 / secs;
                gate_before = now;
                hub.publish_snapshot(snapshot);
            }
        }
    })
}

/// What the rounds before left: the live list as the database last gave it, and
/// when; each voucher's counts at its last read (for rates); and what the last
/// snapshot showed of it (shown again while its buckets do not answer).
#[derive(Default)]
struct Last {
    rows: Option<(Vec<VoucherRow>, i64)>,
    counts: HashMap<i64, Prev>,
    shown: HashMap<i64, VoucherLive>,
    sell_out_checks: SellOutChecks,
}

/// The sell-out checks of sales of several shards whose buckets read empty
/// (`refill::if_sold_out`), in a task of their own, a round's at a time, sales side by
/// side: a store slow to answer holds up no round, and a check is never cut short (it
/// says sold out, then restocked if a unit came back meanwhile).
#[derive(Default)]
struct SellOutChecks(LoneTask);

impl SellOutChecks {
    /// Checks `sales` (id, shards); skipped while the last round's are under way (the
    /// next round hands them again).
    fn start(&mut self, backend: &Backend, sales: Vec<(i64, u32)>) {
        if sales.is_empty() {
            return;
        }
        let backend = backend.clone();
        self.0.start(async move {
            let checks = sales.iter().map(|&(id, shards)| crate::sale::refill::if_sold_out(&backend, id, shards));
            futures::future::join_all(checks).await;
        });
    }
}

/// One round: its snapshot (none until the database first gave the list), and how
/// each store answered, for the log.
struct Round {
    snapshot: Option<Snapshot>,
    database: Result<(), BackendError>,
    redis: Result<(), BackendError>,
}

/// `read`'s answer, or an error once [`figures::DEADLINE`] passed without one: a
/// store that does not answer (stopped, cut off, every pooled connection waiting on a
/// lock) holds up no round.
async fn within<T, E: Into<BackendError>>(
    read: impl Future<Output = Result<T, E>>,
    late: impl FnOnce() -> BackendError,
) -> Result<T, BackendError> {
    match tokio::time::timeout(figures::DEADLINE, read).await {
        Ok(answer) => answer.map_err(Into::into),
        Err(_) => Err(late()),
    }
}

async fn sample(backend: &Backend, flags: &SoldOutFlags, last: &mut Last, sell_outs: &mut SellOuts) -> Round {
    let late_db = || BackendError::Db(sqlx::Error::Io(std::io::ErrorKind::TimedOut.into()));
    let late_redis = || BackendError::Redis(figures::no_answer());
    let listed = within(vouchers::live(&backend.db, SHOWN_AFTER_END_MS), late_db).await;
    let (rows, fresh, database) = match listed {
        Ok(rows) => (rows, true, Ok(())),
        Err(e) => match &last.rows {
            Some((rows, _)) => (rows.clone(), false, Err(e)),
            None => return Round { snapshot: None, database: Err(e), redis: Ok(()) },
        },
    };
    // The gate's clock beside the figures: shoppers' pages read the time from the
    // feed too, and its node may be the one that does not answer.
    let (figures, clock) =
        tokio::join!(figures::read_each(backend, &rows), within(crate::sale::gate::clock(backend, None), late_redis));
    let (figures, failed) = figures;
    let (at_ms, redis) = match clock {
        Ok(at_ms) => (at_ms, failed.map_or(Ok(()), |e| Err(e.into()))),
        Err(e) => (chrono::Utc::now().timestamp_millis(), Err(e)),
    };
    let database_at_ms = if fresh { at_ms } else { last.rows.as_ref().map_or(0, |(_, at)| *at) };
    let snapshot = snapshot_of(backend, (flags, sell_outs), &rows, figures, (at_ms, database_at_ms), last).await;
    if fresh {
        last.rows = Some((rows, at_ms));
    }
    Round { snapshot: Some(snapshot), database, redis }
}

/// The snapshot of `rows` from their `figures` (`None`: the sale's buckets did not
/// all answer, and it shows what it showed last), read at `at_ms`, the rows at
/// `database_at_ms`.
async fn snapshot_of(
    backend: &Backend,
    (flags, sell_outs): (&SoldOutFlags, &mut SellOuts),
    rows: &[VoucherRow],
    figures: Vec<Option<SaleFigures>>,
    (at_ms, database_at_ms): (i64, i64),
    last: &mut Last,
) -> Snapshot {
    let answered = rows.iter().zip(&figures).filter_map(|(row, f)| Some((row, f.as_ref()?)));
    let sold_out_first = answered.filter(|(row, _)| row.sold_out_at.is_none());
    sell_outs
        .keep(&backend.db, sold_out_first.clone().filter_map(|(row, f)| Some((row.id, f.sold_out_at_ms?))).collect());
    // A sale of several shards whose buckets read empty: its sell-out is found by a
    // dry bucket's grab, or here when no grab comes. Not before the start: no grant
    // sold it out then (a withdrawal of every unit did, and the report would say it
    // sold out before it began). A store that fails it, or is slow to, is asked again
    // next round; the figures go out meanwhile.
    let started = |row: &VoucherRow| row.begins_at <= at_ms;
    let empty = sold_out_first.filter(|(row, f)| row.shards() > 1 && f.left == Some(0) && started(row));
    last.sell_out_checks.start(backend, empty.map(|(row, _)| (row.id, row.shards())).collect());
    let read_at = std::time::Instant::now();
    let vouchers: Vec<VoucherLive> = rows
        .iter()
        .zip(figures)
        .map(|(row, f)| match (f, last.shown.get(&row.id)) {
            (Some(f), _) => live(row, &f, (flags, started(row)), &mut last.counts, (read_at, at_ms)),
            // Its buckets did not all answer: what it showed last, without rates.
            (None, Some(shown)) => still(shown, flags),
            // Nor was it shown before: its row's figures, its counts not kept for
            // rates, Redis's never read.
            (None, None) => VoucherLive {
                redis_at_ms: 0,
                ..live(row, &figures::of_row(row), (flags, started(row)), &mut HashMap::new(), (read_at, at_ms))
            },
        })
        .collect();
    last.shown = vouchers.iter().map(|v| (v.voucher_id, v.clone())).collect();
    last.counts.retain(|id, _| last.shown.contains_key(id));
    Snapshot { at_ms, database_at_ms, vouchers, ..Snapshot::default() }
}

/// A voucher's numbers from its figures, with rates since its last read (kept in
/// `counts`); `(flags, started)`: this process's sold-out flags, and whether its sale
/// began by the gate's clock; read at `read_at` (this process's monotonic clock) and
/// `at_ms`.
fn live(
    row: &VoucherRow,
    f: &SaleFigures,
    (flags, started): (&SoldOutFlags, bool),
    counts: &mut HashMap<i64, Prev>,
    (read_at, at_ms): (std::time::Instant, i64),
) -> VoucherLive {
    let voucher_id = f.voucher_id;
    let refused_locally = flags.refused_locally(voucher_id);
    let sold_out = flags.is_flagged(voucher_id);
    // Before the start no grab moves units (a withdrawal's gathering may; Grab is
    // shut anyway), and the sell-out is not looked for: the figure as read.
    let known_sold_out = sold_out || row.sold_out_at.is_some() || !started;
    let left = shown_left(row.shards(), f.left, known_sold_out, counts.get(&voucher_id).map(|p| p.left));
    let (granted, persisted, refused) = (f.granted, f.persisted, f.refused);
    let now = Prev { read_at, left, granted, persisted, refused, refused_locally };
    let before = counts.insert(voucher_id, now).unwrap_or(now);
    let secs = read_at.duration_since(before.read_at).as_secs_f64().max(0.001);
    let rate = |a: i64, b: i64| if a == b { 0.0 } else { (a - b).max(0) as f64 / secs };
    VoucherLive {
        voucher_id,
        stock: f.stock,
        left,
        granted: f.granted,
        persisted: f.persisted,
        stream_length: f.stream_length,
        lag: f.lag.unwrap_or(-1),
        pending: f.pending,
        dead_letters: f.dead_letters,
        grabs_per_s: rate(now.granted, before.granted),
        refused_per_s: rate(now.refused, before.refused),
        refused_locally_per_s: rate(refused_locally as i64, before.refused_locally as i64),
        orders_per_s: rate(now.persisted, before.persisted),
        unpaid: f.unpaid,
        paid: f.paid,
        cancelled: f.cancelled,
        sold_out,
        paused: f.paused,
        begins_at_ms: f.begins_at_ms,
        ends_at_ms: f.ends_at_ms,
        buckets_left: f.buckets_left.clone(),
        redis_at_ms: at_ms,
    }
}

/// What a voucher showed last, again: no rates (nothing was read), this process's
/// sold-out flag as it is now.
fn still(shown: &VoucherLive, flags: &SoldOutFlags) -> VoucherLive {
    VoucherLive {
        grabs_per_s: 0.0,
        refused_per_s: 0.0,
        refused_locally_per_s: 0.0,
        orders_per_s: 0.0,
        sold_out: flags.is_flagged(shown.voucher_id),
        ..shown.clone()
    }
}

/// The units left a snapshot shows (-1: Redis does not hold the sale). A sale of
/// several shards reads its buckets one by one, and a move's units are in neither for
/// a moment: near its end it can read 0 with a unit on its way to a dry bucket. It
/// shows 0 (and so sold out on the shop's cards, which close Grab) only once its
/// sell-out is known (`sold_out`: this process's flag, or the row's record, which
/// `refill::if_sold_out` makes when no unit was moving); until then the last figure
/// it showed stands.
fn shown_left(shards: u32, left: Option<i64>, sold_out: bool, before: Option<i64>) -> i64 {
    match (left, before) {
        (Some(0), Some(before)) if shards > 1 && !sold_out && before > 0 => before,
        _ => left.unwrap_or(-1),
    }
}

/// Each live sale's figures in `snapshot`, in the Prometheus text format, for
/// `/metrics`: the units left (as the dashboard shows them; -1 when Redis does not
/// hold the sale), stream lag (-1 when unknown), pending entries, dead letters and this
/// process's sold-out flag. Written from the snapshot, not kept in the metrics
/// recorder: a sale leaves `/metrics` when it leaves the live list, as it leaves the
/// dashboard (a recorder keeps every gauge it was ever given).
pub fn gauges(snapshot: &Snapshot) -> String {
    type Figure = fn(&VoucherLive) -> i64;
    let figures: [(&str, Figure); 5] = [
        ("seckill_redis_stock", |v| v.left),
        ("seckill_stream_lag", |v| v.lag),
        ("seckill_stream_pending", |v| v.pending),
        ("seckill_dead_letters", |v| v.dead_letters),
        ("seckill_sold_out_flag", |v| i64::from(v.sold_out)),
    ];
    let mut text = String::new();
    if snapshot.vouchers.is_empty() {
        return text;
    }
    for (name, figure) in figures {
        let _ = writeln!(text, "# TYPE {name} gauge");
        for v in &snapshot.vouchers {
            let _ = writeln!(text, "{name}{{voucher=\"{}\"}} {}", v.voucher_id, figure(v));
        }
        text.push('\n');
    }
    // How old the figures above are: those Redis gives, per sale, and those the
    // database gives (what an alert on them must know: a store that does not answer
    // leaves its last figures standing). -1: not read yet.
    let age = |read_at_ms: i64| if read_at_ms > 0 { (snapshot.at_ms - read_at_ms).max(0) } else { -1 };
    let name = "seckill_live_figures_age_ms";
    let _ = writeln!(text, "# TYPE {name} gauge\n{name}{{store=\"database\"}} {}", age(snapshot.database_at_ms));
    for v in &snapshot.vouchers {
        let _ = writeln!(text, "{name}{{store=\"redis\",voucher=\"{}\"}} {}", v.voucher_id, age(v.redis_at_ms));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sale of several shards reading 0 while its sell-out is not known shows what
    /// it showed last: a unit may be moving between buckets (the figures review,
    /// 2026-11-29: before, the shop's card closed Grab for a sample).
    #[test]
    fn a_sharded_sale_reading_empty_shows_0_only_once_its_sell_out_is_known() {
        assert_eq!(shown_left(3, Some(0), false, Some(1)), 1, "a unit may be moving");
        assert_eq!(shown_left(3, Some(0), true, Some(1)), 0, "sold out");
        assert_eq!(shown_left(3, Some(0), false, None), 0, "nothing shown before");
        assert_eq!(shown_left(1, Some(0), false, Some(1)), 0, "one shard reads its one count");
        assert_eq!(shown_left(3, Some(2), false, Some(1)), 2);
        assert_eq!(shown_left(3, None, false, Some(1)), -1, "Redis does not hold it");
    }
}
