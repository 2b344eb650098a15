//! The shopper's page: sign in, see the sales with a countdown, grab, watch the result.

use super::{
    api::{grab, grab_result},
    GrabState, GrabStatus,
};
use crate::live::{view::use_shop_feed, StockLive};
use crate::{
    app::{every, pause},
    auth::{api::me, view::SignInBox, User},
    error::AppError,
    voucher::{api::list_vouchers, Voucher},
};
use chrono::{DateTime, Utc};
use leptos::prelude::*;
use std::collections::HashMap;

#[component]
pub fn ShopPage() -> impl IntoView {
    let user = RwSignal::new(None::<User>);
    let current = Resource::new(|| (), |_| me());
    Effect::new(move |_| {
        if let Some(Ok(u)) = current.get() {
            user.set(u);
        }
    });
    let now = RwSignal::new(Utc::now());
    let refresh = RwSignal::new(0u64);
    every(1000, move || now.set(Utc::now()));
    // New sales appear on the next list refresh; stock moves live.
    every(5000, move || refresh.update(|n| *n += 1));
    let vouchers = Resource::new(move || refresh.get(), |_| list_vouchers());
    let live = use_shop_feed();
    view! {
        <h1 class="mb-4 text-2xl font-bold">"Flash sales"</h1>
        <SignInBox user/>
        <Transition fallback=|| view! { <p>"Loading sales…"</p> }>
            {move || vouchers.get().map(|list| match list {
                Err(e) => view! { <p role="alert">{e.message}</p> }.into_any(),
                Ok(list) if list.is_empty() => view! { <p>"No sales yet."</p> }.into_any(),
                Ok(list) => view! {
                    <div class="grid gap-4 sm:grid-cols-2">
                        <For each=move || list.clone() key=|v| v.id let:v>
                            <SaleCard id=v.id vouchers live now/>
                        </For>
                    </div>
                }.into_any(),
            })}
        </Transition>
    }
}

/// Countdown text: "Starts in 1m 05s", "Ends in 12s", "Ended".
pub fn countdown(now: DateTime<Utc>, begins: DateTime<Utc>, ends: DateTime<Utc>) -> String {
    let fmt = |secs: i64| {
        let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
        if h > 0 {
            format!("{h}h {m:02}m {s:02}s")
        } else if m > 0 {
            format!("{m}m {s:02}s")
        } else {
            format!("{s}s")
        }
    };
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

/// One sale: title, stock, countdown, the Grab button and the grab's result.
#[component]
fn SaleCard(
    id: i64,
    vouchers: Resource<Result<Vec<Voucher>, AppError>>,
    live: RwSignal<HashMap<i64, StockLive>>,
    now: RwSignal<DateTime<Utc>>,
) -> impl IntoView {
    // The card follows the list as it refreshes, without being rebuilt.
    let voucher = move || vouchers.get().and_then(Result::ok).and_then(|l| l.into_iter().find(|v| v.id == id));
    let order_id = RwSignal::new(None::<String>);
    let result = RwSignal::new(None::<GrabState>);
    let refusal = RwSignal::new(None::<String>);
    let grab = Action::new(move |_: &()| grab(id));
    Effect::new(move |_| match grab.value().get() {
        Some(Ok(ticket)) => {
            refusal.set(None);
            order_id.set(Some(ticket.order_id.clone()));
            result.set(None);
            leptos::task::spawn_local(follow(id, ticket.order_id, result, refusal));
        }
        Some(Err(e)) => refusal.set(Some(e.message)),
        None => {}
    });
    let title = move || voucher().map(|v| v.title).unwrap_or_default();
    // Live stock when the feed has it, else the list's.
    let remaining = move || {
        let listed = voucher().map(|v| v.remaining);
        live.with(|m| m.get(&id).map(|l| l.stock.max(0))).or(listed)
    };
    let ended = move || voucher().is_some_and(|v| now.get() >= v.ends_at);
    let sold_out = move || live.with(|m| m.get(&id).is_some_and(|l| l.sold_out)) || remaining() == Some(0);
    view! {
        <article class="rounded-lg bg-white p-4 shadow" aria-label=title>
            <h2 class="text-lg font-semibold">{title}</h2>
            <p>
                {move || voucher().zip(remaining()).map(|(v, left)| format!("{left} of {} left", v.stock))}
            </p>
            <Show when=sold_out>
                <p role="status" class="font-semibold text-rose-700">"Sold out"</p>
            </Show>
            <p class="text-sm text-slate-600">
                {move || voucher().map(|v| countdown(now.get(), v.begins_at, v.ends_at))}
            </p>
            <button class="mt-2 rounded bg-rose-600 px-4 py-1 text-white disabled:opacity-50"
                disabled=move || grab.pending().get() || sold_out() || ended()
                on:click=move |_| { grab.dispatch(()); }>
                "Grab"
            </button>
            <Show when=move || order_id.get().is_some()>
                <p>"Order " <span class="font-mono">{move || order_id.get()}</span></p>
                <p>"Status: " {move || status_text(result.get())}</p>
            </Show>
            <p role="alert" class="text-sm text-red-700">{move || refusal.get()}</p>
        </article>
    }
}

fn status_text(result: Option<GrabState>) -> String {
    match result {
        None => GrabStatus::Queued.as_str().to_owned(),
        Some(GrabState { status: GrabStatus::Failed, reason, .. }) => {
            format!("failed ({})", reason.unwrap_or_else(|| "unknown reason".into()))
        }
        Some(r) => r.status.as_str().to_owned(),
    }
}

/// Polls the grab's result until it is no longer queued.
async fn follow(
    voucher_id: i64,
    order_id: String,
    result: RwSignal<Option<GrabState>>,
    refusal: RwSignal<Option<String>>,
) {
    let mut wait = 200;
    loop {
        pause(wait).await;
        match grab_result(voucher_id, order_id.clone()).await {
            Ok(r) => {
                let done = r.status != GrabStatus::Queued;
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
