//! A sale card: title, stock, countdown, the Grab button and the grab's result. The
//! shop page feeds it the listed voucher and, when the live feed has it, the sale as
//! the gate sees it now ([`LiveSale`]).

use super::clock::ServerClock;
use super::{
    api::{Grab, GrabResult, GrabToken},
    GrabProgress, GrabTicket, IssuedToken,
};
use crate::{
    browser::{jitter, pause},
    error::{AppResult, ErrorCode},
    money,
    voucher::{SaleState, Voucher},
    wire,
};
use chrono::{DateTime, Utc};
use leptos::{prelude::*, server_fn::ServerFn};

/// A sale as the gate sees it now, ahead of the list's refresh: units left, sold out,
/// paused, and its window (Unix ms; an operator may have moved it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveSale {
    /// -1 when Redis does not hold the sale.
    pub left: i64,
    pub sold_out: bool,
    pub paused: bool,
    pub begins_at_ms: i64,
    pub ends_at_ms: i64,
}

/// Countdown text: "Starts in 1m 05s", "Ends in 12s", "Ended".
pub fn countdown(now: DateTime<Utc>, begins: DateTime<Utc>, ends: DateTime<Utc>) -> String {
    let fmt = crate::browser::clock;
    // Rounded up, so "0s" never shows while the moment is still ahead.
    let ceil_secs = |d: chrono::TimeDelta| (d.num_milliseconds().max(0) + 999) / 1000;
    if now < begins {
        format!("Starts in {}", fmt(ceil_secs(begins - now)))
    } else if now < ends {
        format!("Ends in {}", fmt(ceil_secs(ends - now)))
    } else {
        "Ended".to_owned()
    }
}

/// One sale: title, price, stock, its state, countdown, the Grab button and the
/// grab's result.
#[component]
pub fn SaleCard(
    id: i64,
    /// The voucher as listed (`None` until the list has it).
    #[prop(into)]
    voucher: Signal<Option<Voucher>>,
    /// The sale as the gate sees it, when the live feed has it.
    #[prop(into)]
    live: Signal<Option<LiveSale>>,
    /// The gate's clock as the page keeps it.
    clock: ServerClock,
) -> impl IntoView {
    let now = clock.now;
    let title = move || voucher.get().map(|v| v.title).unwrap_or_default();
    // Units left as the feed has them, else the list's.
    let remaining = move || live.get().map(|l| l.left.max(0)).or_else(|| voucher.get().map(|v| v.remaining));
    let state = Signal::derive(move || {
        let live = live.get();
        let window = live.as_ref().map(|l| (l.paused, l.begins_at_ms, l.ends_at_ms, l.sold_out || l.left == 0));
        voucher.get().map(|v| v.state(now.get(), window))
    });
    // Open from the instant the gate opens (by its clock, once the page knows it) to
    // the end or the last unit; a paused sale's press is answered with why.
    let closed = Signal::derive(move || {
        !clock.known.get() || !state.get().is_some_and(|s| matches!(s, SaleState::Live | SaleState::Paused))
    });
    // A sale not yet open: its opening instant, for the page's script to enable the
    // button at before the island arrives (`early`).
    let opens = Signal::derive(move || {
        let begins = live.get().map(|l| l.begins_at_ms).filter(|ms| *ms > 0);
        (state.get() == Some(SaleState::Scheduled))
            .then(|| begins.or_else(|| voucher.get().map(|v| v.begins_at.timestamp_millis())))
            .flatten()
    });
    let price = move || {
        voucher.get().filter(|v| v.price > 0 || v.face_value > 0).map(|v| {
            let worth = if v.face_value > v.price {
                format!(" (worth {})", money::format(v.face_value, &v.currency))
            } else {
                String::new()
            };
            format!("{}{worth}", money::format(v.price, &v.currency))
        })
    };
    let badge = move || match state.get() {
        Some(s @ (SaleState::Paused | SaleState::SoldOut | SaleState::Ended)) => Some(s.label()),
        _ => None,
    };
    view! {
        <article class="rounded-lg bg-white p-4 shadow" aria-label=title>
            <h2 class="text-lg font-semibold">{title}</h2>
            <p class="font-semibold">{price}</p>
            <p>
                {move || voucher.get().zip(remaining()).map(|(v, left)| format!("{left} of {} left", v.stock))}
            </p>
            {move || badge().map(|badge| view! { <p role="status" class="font-semibold text-rose-700">{badge}</p> })}
            <p class="text-sm text-slate-600">
                {move || voucher.get().zip(state.get()).and_then(|(v, s)| {
                    // The gate's window when the feed has it (an operator may have moved it).
                    let at = |ms: Option<i64>, listed| {
                        ms.filter(|ms| *ms > 0).and_then(DateTime::from_timestamp_millis).unwrap_or(listed)
                    };
                    let live = live.get();
                    let begins = at(live.as_ref().map(|l| l.begins_at_ms), v.begins_at);
                    let ends = at(live.as_ref().map(|l| l.ends_at_ms), v.ends_at);
                    (s != SaleState::Ended).then(|| countdown(now.get(), begins, ends))
                })}
            </p>
            <GrabButton id closed opens fair=Signal::derive(move || voucher.get().is_some_and(|v| v.fair_start))/>
        </article>
    }
}

/// Times a grab the server shed is tried again by the page before it says so.
const RETRIES: u32 = 4;

/// The Grab button, the order id it got and where that order stands. For a sale with a
/// fair start, pressing it first asks for the shopper's grab token (issued from the
/// start), then grabs with it: one press, two calls. A press made before the island
/// arrived (`early`) is taken over: its answer shown and followed as if made here.
#[component]
fn GrabButton(id: i64, closed: Signal<bool>, opens: Signal<Option<i64>>, fair: Signal<bool>) -> impl IntoView {
    let order_id = RwSignal::new(None::<String>);
    let result = RwSignal::new(None::<GrabProgress>);
    let refusal = RwSignal::new(None::<String>);
    // A task rather than an `Action`: the same behaviour in less WASM. Pressed already
    // when the page's script pressed it: the island hydrates what the page shows.
    let pending = RwSignal::new(super::early::pressed(id));
    let press = move |early: Option<Option<AppResult<GrabTicket>>>| {
        pending.set(true);
        let fair = fair.get_untracked();
        leptos::task::spawn_local(async move {
            // The token, once had, serves every retry.
            let token = std::cell::RefCell::new(None::<String>);
            let once = || async {
                if fair && token.borrow().is_none() {
                    let issued = grab_token(id).await?.token;
                    *token.borrow_mut() = Some(issued);
                }
                let token = token.borrow().clone();
                grab(id, token).await
            };
            // An early press whose answer was lost is pressed again: if it reached the
            // gate, the retry hears `already_bought`, and says so below.
            let (mut answer, mut retried) = match early {
                Some(Some(answer)) => (answer, false),
                Some(None) => (once().await, true),
                None => (once().await, false),
            };
            // A busy server sheds with `unavailable` and `Retry-After: 1`: say so and try
            // again after that second, doubling, each plus a random share as long, so
            // shed shoppers do not all come back at once.
            for attempt in 0..RETRIES {
                match &answer {
                    Err(e) if e.code == ErrorCode::Unavailable => {
                        refusal.try_set(Some("Busy, retrying…".to_owned()));
                        let wait = 1000u32 << attempt;
                        pause(wait + jitter(wait)).await;
                        retried = true;
                        answer = once().await;
                    }
                    _ => break,
                }
            }
            // An `unavailable` that was a slow gate, not a shed, may have been granted
            // after all: the retry then hears `already_bought`.
            if retried {
                if let Err(e) = &mut answer {
                    if e.code == ErrorCode::AlreadyBought {
                        let which = e.order_id.as_ref().map(|id| format!(" (order {id})")).unwrap_or_default();
                        e.message = format!("Your grab went through{which}: the order is under My orders.");
                    }
                }
            }
            pending.try_set(false);
            match answer {
                Ok(ticket) => {
                    refusal.try_set(None);
                    order_id.try_set(Some(ticket.order_id.clone()));
                    result.try_set(None);
                    follow(id, ticket, result, refusal).await;
                }
                Err(e) => {
                    refusal.try_set(Some(e.message));
                }
            }
        })
    };
    // In the browser only: the server has no early presses.
    #[cfg(feature = "hydrate")]
    leptos::task::spawn_local(async move {
        if let Some(early) = super::early::answer(id).await {
            press(Some(early));
        }
    });
    view! {
        // `data-*`: what the page's script reads before the island arrives.
        <button class="mt-2 rounded bg-rose-600 px-4 min-h-11 min-w-11 py-1 text-white disabled:opacity-50"
            data-grab=id data-fair=move || fair.get().then_some("") data-opens=opens
            disabled=move || pending.get() || closed.get()
            on:click=move |_| press(None)>
            "Grab"
        </button>
        {move || order_id.get().map(|id| view! {
            <p>"Order " <span class="font-mono">{id}</span></p>
            <p>"Status: " {move || result.get().unwrap_or_else(GrabProgress::queued).text()}</p>
        })}
        <p role="alert" class="text-sm text-red-700">{move || refusal.get()}</p>
    }
}

/// The card's calls, made by the browser without serde (`wire`): the shop's island is
/// every shopper's first load. Their arguments are the server functions' (a test holds
/// them to it).
async fn grab_token(voucher_id: i64) -> AppResult<IssuedToken> {
    wire::call(GrabToken::PATH, token_args(voucher_id)).await
}

fn token_args(voucher_id: i64) -> wire::Args {
    wire::Args::new().int("voucher_id", voucher_id)
}

async fn grab(voucher_id: i64, token: Option<String>) -> AppResult<GrabTicket> {
    wire::call(Grab::PATH, grab_args(voucher_id, token.as_deref())).await
}

fn grab_args(voucher_id: i64, token: Option<&str>) -> wire::Args {
    wire::Args::new().int("voucher_id", voucher_id).text("token", token)
}

async fn grab_result(voucher_id: i64, ticket: &GrabTicket) -> AppResult<GrabProgress> {
    wire::call(GrabResult::PATH, result_args(voucher_id, ticket)).await
}

fn result_args(voucher_id: i64, ticket: &GrabTicket) -> wire::Args {
    wire::Args::new()
        .int("voucher_id", voucher_id)
        .text("order_id", Some(&ticket.order_id))
        .text("receipt", Some(&ticket.receipt))
}

/// Polls the grab's result until it is no longer queued.
async fn follow(
    voucher_id: i64,
    ticket: GrabTicket,
    result: RwSignal<Option<GrabProgress>>,
    refusal: RwSignal<Option<String>>,
) {
    let mut wait = 200;
    loop {
        pause(wait).await;
        match grab_result(voucher_id, &ticket).await {
            Ok(r) => {
                let done = r != GrabProgress::queued();
                result.set(Some(r));
                if done {
                    return;
                }
            }
            Err(e) => {
                refusal.set(Some(e.message));
                return;
            }
        }
        wait = (wait * 2).min(2000);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The island's calls send what the server functions take.
    #[cfg(not(feature = "hydrate"))]
    #[test]
    fn the_cards_calls_send_the_server_functions_arguments() {
        let json = |args: wire::Args| serde_json::Value::Object(args.map);
        let grab = Grab { voucher_id: 7, token: Some("t".into()) };
        assert_eq!(json(grab_args(7, Some("t"))), serde_json::to_value(grab).unwrap());
        let grab = Grab { voucher_id: 7, token: None };
        assert_eq!(json(grab_args(7, None)), serde_json::to_value(grab).unwrap());
        let ticket = GrabTicket { order_id: "12".into(), status: super::super::Queued::Queued, receipt: "r".into() };
        let asked = GrabResult { voucher_id: 7, order_id: "12".into(), receipt: Some("r".into()) };
        assert_eq!(json(result_args(7, &ticket)), serde_json::to_value(asked).unwrap());
        let token = GrabToken { voucher_id: 7 };
        assert_eq!(json(token_args(7)), serde_json::to_value(token).unwrap());
    }

    #[test]
    fn countdown_reads_naturally() {
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let (b, e) = (t("2026-11-23T10:00:00Z"), t("2026-11-23T11:00:00Z"));
        assert_eq!(countdown(t("2026-11-23T09:58:55Z"), b, e), "Starts in 1m 05s");
        assert_eq!(countdown(t("2026-11-23T10:59:50Z"), b, e), "Ends in 10s");
        assert_eq!(countdown(t("2026-11-23T08:00:00Z"), b, e), "Starts in 2h 00m 00s");
        assert_eq!(countdown(e, b, e), "Ended");
    }
}
