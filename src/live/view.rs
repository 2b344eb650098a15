//! The browser side of the live feed: the operator's live board (numbers, progress, charts, event log) and the shoppers'
//! live stock.

#[cfg(any(test, feature = "hydrate"))]
use super::StockLive;
use super::{EventKind, LiveEvent, OperatorFrame, Snapshot, VoucherLive};
use crate::{
    auth::operator_api::admin_status,
    browser::{clock, listen, local_clock, pause, Connection},
};
use leptos::prelude::*;
use std::collections::{HashMap, VecDeque};
#[cfg(feature = "hydrate")]
use {
    super::ShopFrame,
    std::{cell::RefCell, rc::Rc},
};

/// Points kept per chart: 3 minutes at the sampler's 4 a second.
const MAX_POINTS: usize = 720;
/// Events shown in the log.
const MAX_EVENTS: usize = 50;
/// Figures read longer ago than this before their snapshot are said to be behind: the
/// sampler reads every 250 ms and waits a second for a store.
const BEHIND_AFTER_MS: i64 = 1_500;

/// One point of a voucher's charts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub at_ms: i64,
    pub grabs_per_s: f64,
    pub orders_per_s: f64,
    pub left: f64,
}

/// What the operator's board shows, updated by the feed.
#[derive(Clone, Copy)]
pub struct OperatorFeed {
    pub connection: RwSignal<Connection>,
    pub latest: RwSignal<HashMap<i64, VoucherLive>>,
    pub series: RwSignal<HashMap<i64, VecDeque<Point>>>,
    pub events: RwSignal<VecDeque<LiveEvent>>,
    /// Grabs this process admitted and shed per second (admission control).
    pub gate: RwSignal<(f64, f64)>,
    /// The latest snapshot's time, and when the database's figures in it were read.
    pub read_at: RwSignal<(i64, i64)>,
}

impl OperatorFeed {
    fn apply(&self, frame: OperatorFrame) -> Option<()> {
        match frame {
            OperatorFrame::Hello { history, events } => {
                set(self.series, HashMap::new())?;
                for snapshot in history {
                    self.add_points(&snapshot)?;
                }
                set(self.events, events.into_iter().rev().collect())?;
            }
            OperatorFrame::Snapshot(snapshot) => {
                self.add_points(&snapshot)?;
                set(self.gate, (snapshot.admitted_per_s, snapshot.shed_per_s))?;
                set(self.read_at, (snapshot.at_ms, snapshot.database_at_ms))?;
                set(self.latest, snapshot.vouchers.into_iter().map(|v| (v.voucher_id, v)).collect())?;
            }
            OperatorFrame::Event(event) => {
                // Sold out shows at once, not at the next snapshot.
                if let (EventKind::SoldOut, Some(id)) = (event.kind, event.voucher_id) {
                    self.latest.try_update(|m| {
                        if let Some(v) = m.get_mut(&id) {
                            v.left = 0;
                            v.sold_out = true;
                        }
                    })?;
                }
                self.events.try_update(|log| {
                    log.push_front(event);
                    log.truncate(MAX_EVENTS);
                })?;
            }
        }
        Some(())
    }

    fn add_points(&self, snapshot: &Snapshot) -> Option<()> {
        self.series.try_update(|series| {
            for v in &snapshot.vouchers {
                let points = series.entry(v.voucher_id).or_default();
                if points.len() == MAX_POINTS {
                    points.pop_front();
                }
                points.push_back(Point {
                    at_ms: snapshot.at_ms,
                    grabs_per_s: v.grabs_per_s,
                    orders_per_s: v.orders_per_s,
                    left: v.left.max(0) as f64,
                });
            }
        })
    }
}

/// How far behind figures read at `read_at_ms` are in a snapshot of `at_ms`, as the
/// board says it: `None` while they are fresh, or when the server did not say (0).
fn behind(at_ms: i64, read_at_ms: i64) -> Option<String> {
    let age = at_ms - read_at_ms;
    let read_at = chrono::DateTime::from_timestamp_millis(read_at_ms).filter(|_| read_at_ms > 0)?;
    (age > BEHIND_AFTER_MS).then(|| format!("as of {} ({} ago)", local_clock(read_at), clock(age / 1_000)))
}

/// Sets a signal; `None` when its component is gone (the feed then closes).
fn set<T: Send + Sync + 'static>(signal: RwSignal<T>, value: T) -> Option<()> {
    signal.try_set(value).is_none().then_some(())
}

/// Opens the operator's feed for as long as the calling component lives.
pub fn use_operator_feed() -> OperatorFeed {
    let feed = OperatorFeed {
        connection: RwSignal::new(Connection::Connecting),
        latest: RwSignal::new(HashMap::new()),
        series: RwSignal::new(HashMap::new()),
        events: RwSignal::new(VecDeque::new()),
        gate: RwSignal::new((0.0, 0.0)),
        read_at: RwSignal::new((0, 0)),
    };
    Effect::new(move |_| {
        listen(super::FEED_PATH, feed.connection, move |text| {
            serde_json::from_str::<OperatorFrame>(&text).ok().map_or(Some(()), |f| feed.apply(f))
        });
    });
    feed
}

/// Live stock per voucher for the shoppers' page: the feed's messages kept in `stock`
/// (empty until the first), and `changed` called after each. For as long as the page
/// lives (the shop's island never goes).
#[cfg(feature = "hydrate")]
pub fn follow_shop_feed(stock: Rc<RefCell<HashMap<i64, StockLive>>>, changed: impl Fn() + 'static) {
    // Read without serde (`wire`): this is in every shopper's first load.
    listen(super::SHOP_FEED_PATH, RwSignal::new(Connection::Connecting), move |text| {
        match crate::wire::parse::<ShopFrame>(&text) {
            Some(ShopFrame::Stock { vouchers, .. }) => {
                *stock.borrow_mut() = vouchers.into_iter().map(|v| (v.voucher_id, v)).collect();
            }
            Some(ShopFrame::Event(e)) => apply_stock_event(&mut stock.borrow_mut(), &e),
            None => return Some(()),
        }
        changed();
        Some(())
    });
}

/// A sold-out or restock event changes a card at once, before the next snapshot. Only
/// sold out says enough to stand for a sale the feed has not sent yet: any other event
/// about one waits for the snapshot (an entry made up from it would read "0 left").
/// A restock puts at least one unit back (a give-back puts one, an operator more): a
/// card that read none reads one until the snapshot says how many, or it would still
/// read Sold out, with Grab shut, for up to a sampling period.
#[cfg(any(test, feature = "hydrate"))]
fn apply_stock_event(map: &mut HashMap<i64, StockLive>, e: &LiveEvent) {
    let Some(id) = e.voucher_id else { return };
    match e.kind {
        EventKind::SoldOut => {
            let entry = map.entry(id).or_insert_with(|| StockLive { voucher_id: id, ..StockLive::default() });
            entry.sold_out = true;
            entry.left = 0;
        }
        EventKind::Restocked => {
            if let Some(entry) = map.get_mut(&id) {
                entry.sold_out = false;
                entry.left = entry.left.max(1);
            }
        }
        _ => {}
    }
}

/// A small line chart of `values` (oldest first), scaled to its own maximum.
#[component]
pub fn Sparkline(
    #[prop(into)] values: Signal<Vec<f64>>,
    label: &'static str,
    color: &'static str,
    /// Top of the scale; by default the largest value shown.
    #[prop(optional, into)]
    top: Option<Signal<f64>>,
) -> impl IntoView {
    let points = move || {
        let values = values.get();
        let largest = values.iter().copied().fold(1.0_f64, f64::max);
        let max = top.map_or(largest, |t| t.get().max(largest));
        let step = 300.0 / (MAX_POINTS.max(2) - 1) as f64;
        let offset = 300.0 - step * values.len().saturating_sub(1) as f64;
        values
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{:.1},{:.1}", offset + step * i as f64, 58.0 - 56.0 * v / max))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let last = move || values.get().last().map(|v| format!("{v:.0}")).unwrap_or_else(|| "–".into());
    view! {
        <figure class="rounded bg-slate-100 p-2">
            <figcaption class="flex justify-between text-xs text-slate-700">
                <span>{label}</span>
                <span>{last}</span>
            </figcaption>
            <svg viewBox="0 0 300 60" class="h-14 w-full" role="img" aria-label=format!("{label} chart")>
                <polyline fill="none" stroke=color stroke-width="2" points=points/>
            </svg>
        </figure>
    }
}

/// The operator's live board: connection state, one panel per live voucher, the log.
#[component]
pub fn LiveBoard(
    titles: Signal<HashMap<i64, String>>,
    /// Set to false when the server no longer knows this browser as an operator's.
    unlocked: RwSignal<bool>,
) -> impl IntoView {
    let feed = use_operator_feed();
    // While reconnecting, ask whether this browser is still an operator's: a server restarted
    // with a new session key refuses the old operator cookie, and then the token is
    // needed again rather than endless retries.
    Effect::new(move |_| {
        if feed.connection.get() == Connection::Reconnecting {
            leptos::task::spawn_local(async move {
                loop {
                    if let Ok(false) = admin_status().await {
                        unlocked.try_set(false);
                        return;
                    }
                    pause(2000).await;
                    if feed.connection.try_get_untracked() != Some(Connection::Reconnecting) {
                        return;
                    }
                }
            });
        }
    });
    let ids = move || {
        let mut ids: Vec<i64> = feed.latest.get().keys().copied().collect();
        ids.sort_unstable_by(|a, b| b.cmp(a));
        ids
    };
    view! {
        <section aria-label="Live dashboard" class="mt-6">
            <div class="mb-2 flex items-center gap-3">
                <h2 class="text-xl font-semibold">"Live"</h2>
                <span role="status" aria-label="Feed" class=move || match feed.connection.get() {
                    Connection::Live => "rounded bg-green-100 px-2 text-sm text-green-800",
                    _ => "rounded bg-amber-100 px-2 text-sm text-amber-800",
                }>{move || feed.connection.get().label()}</span>
                <span class="text-sm text-slate-700" aria-label="Admission">
                    {move || { let (admitted, shed) = feed.gate.get();
                        format!("this process: admitted {admitted:.0}/s, shed {shed:.0}/s") }}
                </span>
            </div>
            {move || { let (at, database_at) = feed.read_at.get(); behind(at, database_at) }.map(|when| view! {
                <p role="status" aria-label="Database figures behind"
                    class="mb-2 rounded bg-amber-100 px-2 py-1 text-sm text-amber-900">
                    {format!("The database is not answering: the list of sales and their saved, unpaid, paid \
                        and cancelled orders are {when}.")}
                </p>
            })}
            <div class="grid gap-4">
                <For each=ids key=|id| *id let:id>
                    <LivePanel id feed titles/>
                </For>
            </div>
            <EventLog events=feed.events/>
        </section>
    }
    .into_any()
}

#[component]
fn LivePanel(id: i64, feed: OperatorFeed, titles: Signal<HashMap<i64, String>>) -> impl IntoView {
    let live = move || feed.latest.with(|m| m.get(&id).cloned()).unwrap_or_default();
    let title = move || titles.with(|t| t.get(&id).cloned()).unwrap_or_else(|| format!("Voucher #{id}"));
    let series = move |f: fn(&Point) -> f64| {
        Signal::derive(move || feed.series.with(|s| s.get(&id).map(|p| p.iter().map(f).collect()).unwrap_or_default()))
    };
    let big = |label: &'static str, value: Signal<String>| {
        view! {
            <div class="rounded bg-slate-100 p-2">
                <dt class="text-xs text-slate-700">{label}</dt>
                <dd class="text-2xl font-bold tabular-nums">{value}</dd>
            </div>
        }
    };
    let num = move |f: fn(&VoucherLive) -> i64| Signal::derive(move || f(&live()).to_string());
    // A figure Redis cannot give now (it does not hold the sale): "–", not 0.
    let known = |n: i64| if n < 0 { "–".to_owned() } else { n.to_string() };
    let sold = move || live().granted;
    view! {
        <article class="rounded-lg bg-white p-4 shadow" aria-label=move || format!("Live {}", title())>
            <div class="flex items-center justify-between">
                <h3 class="font-semibold">{move || format!("#{id} {}", title())}</h3>
                <Show when=move || live().left == 0>
                    <span class="rounded bg-rose-100 px-2 text-sm font-semibold text-rose-800">"Sold out"</span>
                </Show>
            </div>
            <div class="my-2 h-3 w-full rounded bg-slate-200" role="progressbar" aria-label="Sold"
                aria-valuemin="0" aria-valuenow=sold aria-valuemax=move || live().stock>
                <div class="h-3 rounded bg-rose-600"
                    style:width=move || format!("{:.1}%", 100.0 * sold() as f64 / live().stock.max(1) as f64)></div>
            </div>
            <dl class="grid grid-cols-3 gap-2 lg:grid-cols-9">
                {big("Stock left", Signal::derive(move || { let l = live(); format!("{} / {}", known(l.left), l.stock) }))}
                {big("Granted", num(|l| l.granted))}
                {big("Persisted", num(|l| l.persisted))}
                {big("Queue depth", Signal::derive(move || known(live().lag)))}
                {big("Pending", num(|l| l.pending))}
                {big("Dead letters", num(|l| l.dead_letters))}
                {big("Unpaid", num(|l| l.unpaid))}
                {big("Paid", num(|l| l.paid))}
                {big("Cancelled", num(|l| l.cancelled))}
            </dl>
            <div class="mt-2 grid gap-2 sm:grid-cols-3">
                <Sparkline values=series(|p| p.grabs_per_s) label="Grabs/s" color="#e11d48"/>
                <Sparkline values=series(|p| p.orders_per_s) label="Orders/s" color="#2563eb"/>
                <Sparkline values=series(|p| p.left) label="Left" color="#16a34a"
                    top=Signal::derive(move || live().stock as f64)/>
            </div>
            <p class="mt-1 text-xs text-slate-600">
                {move || { let l = live(); format!(
                    "refused {:.0}/s at the gate, {:.0}/s locally here; stream {} entries",
                    l.refused_per_s, l.refused_locally_per_s, l.stream_length) }}
            </p>
            {move || behind(feed.read_at.get().0, live().redis_at_ms).map(|when| view! {
                <p role="status" aria-label="Redis figures behind"
                    class="mt-1 rounded bg-amber-100 px-2 py-1 text-sm text-amber-900">
                    {format!("Redis is not answering for this sale: stock left, granted, queue, pending and \
                        dead letters are {when}.")}
                </p>
            })}
            <Show when=move || !live().buckets_left.is_empty()>
                <p class="mt-1 text-xs text-slate-600" aria-label="Left per bucket">
                    {move || { let l = live(); let per: Vec<String> = l.buckets_left.iter()
                        .map(|n| if *n < 0 { "lost".to_owned() } else { n.to_string() }).collect();
                        format!("left per bucket ({} shards): {}", per.len(), per.join(" · ")) }}
                </p>
            </Show>
        </article>
    }
    .into_any()
}

#[component]
fn EventLog(events: RwSignal<VecDeque<LiveEvent>>) -> impl IntoView {
    view! {
        <section class="mt-4 rounded-lg bg-white p-4 shadow" aria-label="Event log">
            <h3 class="mb-2 font-semibold">"Events"</h3>
            // The log role goes on a wrapper: on the list itself it would hide the list.
            <div role="log">
                <ol class="space-y-1 text-sm">
                    {move || events.get().into_iter().map(|e| {
                        // In the operator's zone, by hand (`browser::local_clock`).
                        let at = chrono::DateTime::from_timestamp_millis(e.at_ms)
                            .map(crate::browser::local_clock)
                            .unwrap_or_default();
                        view! { <li><span class="mr-2 font-mono text-slate-600">{at}</span>{e.describe()}</li> }
                    }).collect_view()}
                </ol>
            </div>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_over_a_second_and_a_half_before_their_snapshot_are_behind() {
        let at = 1_700_000_000_000;
        assert_eq!(behind(at, at), None);
        assert_eq!(behind(at, at - 1_500), None, "a round or two late is not behind");
        let said = behind(at, at - 12_000).expect("behind");
        assert!(said.starts_with("as of ") && said.ends_with(" (12s ago)"), "{said}");
        assert_eq!(behind(at, 0), None, "a server that does not say");
    }

    #[test]
    fn only_sold_out_stands_for_a_sale_the_feed_has_not_sent_and_a_restock_reopens() {
        let event = |kind, id| LiveEvent { at_ms: 1, kind, voucher_id: Some(id), detail: None };
        let mut map = HashMap::new();
        apply_stock_event(&mut map, &event(EventKind::Restocked, 7));
        assert!(map.is_empty(), "a restock of an unknown sale made up {map:?}");
        apply_stock_event(&mut map, &event(EventKind::SoldOut, 7));
        assert!(map[&7].sold_out && map[&7].left == 0);
        apply_stock_event(&mut map, &event(EventKind::Restocked, 7));
        // What a card reads as sold out (`sale::view::CardView::of`): neither.
        assert!(!map[&7].sold_out && map[&7].left == 1, "a restocked sale still reads sold out: {map:?}");
        map.get_mut(&7).unwrap().left = 40;
        apply_stock_event(&mut map, &event(EventKind::Restocked, 7));
        assert_eq!(map[&7].left, 40, "a restock lowered a known count");
        apply_stock_event(&mut map, &event(EventKind::DeadLettered, 8));
        assert_eq!(map.len(), 1);
    }
}
