//! The report's page body: the figures, a chart of the grabs per second by answer, the
//! refusal mix, the gate's latency, orders and units, and the operator's actions.

use super::{api::sale_report, in_steps, LatencyBin, Outcome, Report};
use crate::{
    browser::{every, local_time},
    money,
};
use leptos::prelude::*;
use std::collections::BTreeMap;

/// How often an open report is read again (a sale may still run).
const REFRESH_MS: u64 = 5_000;
/// Most bars the per-second chart draws; a longer sale is drawn a few seconds a bar.
const MAX_BARS: i64 = 600;

/// The report of `voucher_id`, read again every few seconds.
#[component]
pub fn SaleReportView(voucher_id: i64) -> impl IntoView {
    let refresh = RwSignal::new(0u64);
    every(REFRESH_MS, move || refresh.update(|n| *n += 1));
    let report = Resource::new(move || refresh.get(), move |_| sale_report(voucher_id));
    view! {
        <Transition fallback=|| view! { <p>"Reading the report…"</p> }>
            {move || report.get().map(|r| match r {
                Ok(r) => body(r).into_any(),
                Err(e) => view! { <p role="alert" class="text-red-700">{e.message}</p> }.into_any(),
            })}
        </Transition>
    }
}

fn body(r: Report) -> impl IntoView {
    let v = &r.voucher;
    let sold_out = match r.time_to_sell_out_ms {
        Some(ms) => format!("{:.3} s after the start", ms as f64 / 1000.0),
        None => "not sold out".into(),
    };
    let price = money::format(v.price, &v.currency);
    let csv = format!("{}?voucher_id={}", super::api::CSV_PATH, v.id);
    let figures = [
        ("Window", format!("{} – {}", local_time(v.begins_at), local_time(v.ends_at))),
        ("Price", price),
        ("Sold out", sold_out),
        ("Granted", r.answers[&Outcome::Granted].to_string()),
        ("Refused", r.answers.iter().filter(|(o, _)| **o != Outcome::Granted).map(|(_, n)| n).sum::<i64>().to_string()),
    ];
    let l = &r.latency;
    let ms = |p: Option<f64>| p.map_or("–".into(), |p| format!("≤ {p} ms"));
    let latency = [("p50", ms(l.p50_ms)), ("p90", ms(l.p90_ms)), ("p99", ms(l.p99_ms)), ("p99.9", ms(l.p999_ms))];
    let o = &r.orders;
    let orders = [
        ("Orders", o.total),
        ("Paid", o.paid),
        ("Unpaid", o.unpaid),
        ("Cancelled by shopper", o.cancelled_by_shopper),
        ("Timed out", o.timed_out),
    ];
    let u = &r.units;
    let units = [
        ("On sale", u.on_sale),
        ("Added", u.added),
        ("Withdrawn", u.withdrawn),
        ("Sold", u.sold),
        ("Returned", u.returned),
        ("Resold", u.resold),
        ("Left", u.left),
        ("Dead letters", u.dead_letters),
        ("Lost", u.lost),
    ];
    view! {
        <section class="grid gap-4" aria-label="Sale report">
            <div class="flex flex-wrap items-baseline justify-between gap-2">
                <h2 class="text-xl font-semibold">{format!("{} (#{})", v.title, v.id)}</h2>
                <a class="text-rose-700 underline" href=csv download>"Grabs per second (CSV)"</a>
            </div>
            <Figures title="Sale" items=figures.to_vec()/>
            <figure class="rounded bg-white p-3 shadow">
                <figcaption class="mb-1 font-semibold">"Grabs per second, by answer"</figcaption>
                {per_second_chart(&r)}
                {legend(&r.answers)}
            </figure>
            <Figures title="Gate latency" items=latency.to_vec()
                note=format!("{} grabs decided at the gate; bins' upper bounds", l.grabs)>
                {histogram(&r.latency.bins)}
            </Figures>
            <Figures title="Orders" items=orders.map(|(k, n)| (k, n.to_string())).to_vec()/>
            <Figures title="Units" items=units.map(|(k, n)| (k, n.to_string())).to_vec()/>
            <section class="rounded bg-white p-3 shadow">
                <h3 class="font-semibold">"Operator actions"</h3>
                <ul class="list-disc pl-5 text-sm" aria-label="Operator actions">
                    {r.actions.into_iter().map(crate::audit::view::log_line).collect_view()}
                </ul>
            </section>
        </section>
    }
}

/// A titled row of figures.
#[component]
fn Figures(
    title: &'static str,
    items: Vec<(&'static str, String)>,
    #[prop(optional, into)] note: Option<String>,
    #[prop(optional)] children: Option<Children>,
) -> impl IntoView {
    view! {
        <section class="rounded bg-white p-3 shadow" aria-label=title>
            <h3 class="font-semibold">{title}</h3>
            <dl class="mt-1 flex flex-wrap gap-x-6 gap-y-1 text-sm">
                {items.into_iter().map(|(k, v)| view! {
                    <div><dt class="text-slate-600">{k}</dt><dd class="font-mono text-base">{v}</dd></div>
                }).collect_view()}
            </dl>
            {note.map(|n| view! { <p class="mt-1 text-xs text-slate-600">{n}</p> })}
            {children.map(|c| c())}
        </section>
    }
}

/// Each outcome's colour in the chart and its legend.
fn color(o: Outcome) -> &'static str {
    match o {
        Outcome::Granted => "#15803d",
        Outcome::SoldOut => "#64748b",
        Outcome::AlreadyBought => "#0369a1",
        Outcome::NotStarted => "#7e22ce",
        Outcome::Ended => "#44403c",
        Outcome::SalePaused => "#b45309",
        Outcome::InvalidToken => "#be123c",
        Outcome::RateLimited => "#db2777",
        Outcome::Shed => "#ea580c",
        Outcome::Unavailable => "#7f1d1d",
    }
}

/// Stacked bars, one per second (or per few seconds in a long sale) from the first
/// grab to the last, one SVG path per outcome.
fn per_second_chart(r: &Report) -> impl IntoView {
    let (Some(first), Some(last)) = (r.seconds.first(), r.seconds.last()) else {
        return view! { <p class="text-sm text-slate-600">"No grabs yet."</p> }.into_any();
    };
    // Whole steps to a bar (the report's own, summed again), so that no bar gets one
    // more step than the next; a bar for every step from the first to the last.
    let (summed, per_bar) = in_steps(r.seconds.clone(), r.step_secs, MAX_BARS);
    let bars = ((last.at - first.at) / per_bar + 1) as usize;
    let mut totals = vec![BTreeMap::<Outcome, i64>::new(); bars];
    for s in summed {
        totals[((s.at - first.at) / per_bar) as usize] = s.answers;
    }
    let top = totals.iter().map(|b| b.values().sum::<i64>()).max().unwrap_or(1).max(1) as f64;
    let (width, height) = (600.0, 160.0);
    let w = width / bars as f64;
    let paths = Outcome::ALL
        .iter()
        .map(|&o| {
            let mut d = String::new();
            for (i, bar) in totals.iter().enumerate() {
                let below: i64 = bar.iter().filter(|(k, _)| **k < o).map(|(_, n)| n).sum();
                let n = bar.get(&o).copied().unwrap_or(0);
                if n > 0 {
                    let (y0, h) = (height * (1.0 - below as f64 / top), height * n as f64 / top);
                    d.push_str(&format!("M{:.2} {:.2}h{:.2}v{:.2}h{:.2}z", i as f64 * w, y0 - h, w, h, -w));
                }
            }
            view! { <path d=d fill=color(o)/> }
        })
        .collect::<Vec<_>>();
    let label = format!(
        "Grabs per {}, from {} to {}; highest {top}",
        if per_bar == 1 { "second".to_owned() } else { format!("{per_bar} seconds") },
        local_time(chrono::DateTime::from_timestamp(first.at, 0).unwrap_or_default()),
        local_time(chrono::DateTime::from_timestamp(last.at, 0).unwrap_or_default()),
    );
    view! {
        <svg viewBox="0 0 600 160" preserveAspectRatio="none" class="h-40 w-full bg-slate-50" role="img" aria-label=label.clone()>
            {paths.to_vec()}
        </svg>
        <p class="text-xs text-slate-600">{label}</p>
    }
    .into_any()
}

/// The answers over the whole sale, each with its colour and share.
fn legend(answers: &BTreeMap<Outcome, i64>) -> impl IntoView {
    let all: i64 = answers.values().sum::<i64>().max(1);
    view! {
        <table class="mt-2 text-sm" aria-label="Answers">
            <tbody>
                {answers.iter().map(|(o, n)| view! {
                    <tr>
                        <td class="pr-2"><span class="inline-block h-3 w-3 rounded-sm" style=format!("background:{}", color(*o))></span></td>
                        <th scope="row" class="pr-4 text-left font-normal">{o.label()}</th>
                        <td class="pr-4 text-right font-mono">{*n}</td>
                        <td class="text-right font-mono text-slate-600">{format!("{:.1} %", 100.0 * *n as f64 / all as f64)}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}

/// Grabs per latency bin, as bars.
fn histogram(bins: &[LatencyBin]) -> impl IntoView {
    let top = bins.iter().map(|b| b.grabs).max().unwrap_or(1).max(1) as f64;
    view! {
        <ul class="mt-2 grid gap-0.5 text-xs" aria-label="Gate latency bins">
            {bins.iter().map(|&LatencyBin { le_ms: le, grabs: n }| view! {
                <li class="flex items-center gap-2">
                    <span class="w-20 text-right font-mono">{format!("≤ {le} ms")}</span>
                    <span class="h-3 bg-sky-700" style=format!("width:{:.1}%", 80.0 * n as f64 / top)></span>
                    <span class="font-mono">{n}</span>
                </li>
            }).collect_view()}
        </ul>
    }
}
