//! The operator's sale components: the form that puts a new voucher on sale, a
//! voucher's row with its Warm up button, and its log (the admin page lists them).

use super::admin::{create_voucher, list_audit, warm_up};
use crate::{audit::AuditEntry, error::AppError, voucher::Voucher};
use chrono::{Datelike, Timelike};
use chrono::{Duration, SubsecRound, Utc};
use leptos::prelude::*;

/// The form that puts a new voucher on sale; bumps `refresh` when one was created.
#[component]
pub fn CreateVoucher(refresh: RwSignal<u64>) -> impl IntoView {
    let start = Utc::now().trunc_subsecs(0);
    let title = RwSignal::new(String::new());
    let stock = RwSignal::new("100".to_owned());
    let begins = RwSignal::new(start.to_rfc3339());
    let ends = RwSignal::new((start + Duration::hours(1)).to_rfc3339());
    let create = Action::new(|(t, s, b, e): &(String, String, String, String)| {
        let (t, b, e) = (t.clone(), b.clone(), e.clone());
        let s = s.trim().parse::<i64>();
        async move {
            let s = s.map_err(|_| AppError::invalid("Stock must be a whole number."))?;
            create_voucher(t, s, b, e).await
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(_)) = create.value().get() {
            refresh.update(|n| *n += 1);
        }
    });
    let message = move || match create.value().get() {
        Some(Ok(v)) => Some(format!("Created voucher #{}: {}", v.id, v.title)),
        Some(Err(e)) => Some(e.message),
        None => None,
    };
    let field = |id: &'static str, label: &'static str, value: RwSignal<String>, hint: &'static str| {
        let hint_id = format!("{id}-hint");
        view! {
            <div class="flex flex-col text-sm">
                <label for=id>{label}</label>
                <input id=id class="rounded border px-2 py-1" type="text" bind:value=value
                    aria-describedby=hint_id.clone()/>
                <span id=hint_id class="text-xs text-slate-600">{hint}</span>
            </div>
        }
    };
    view! {
        <form class="grid gap-3 rounded-lg bg-white p-4 shadow sm:grid-cols-2" aria-label="New voucher"
            on:submit=move |ev| {
                ev.prevent_default();
                create.dispatch((title.get_untracked(), stock.get_untracked(), begins.get_untracked(), ends.get_untracked()));
            }>
            {field("voucher-title", "Title", title, "Up to 100 characters")}
            {field("voucher-stock", "Stock", stock, "1 to 1,000,000 units")}
            {field("voucher-begins", "Starts at", begins, "RFC 3339, e.g. 2026-11-23T10:00:00Z")}
            {field("voucher-ends", "Ends at", ends, "RFC 3339, after the start")}
            <div class="flex items-center gap-3 sm:col-span-2">
                <button class="rounded bg-rose-600 px-4 py-1 text-white" type="submit">"Create voucher"</button>
                <p role="status">{message}</p>
            </div>
        </form>
    }
}

/// One voucher: its window and its Warm up button.
#[component]
pub fn VoucherRow(voucher: Voucher) -> impl IntoView {
    let id = voucher.id;
    let warm = Action::new(move |_: &()| warm_up(id));
    let warm_message = move || match warm.value().get() {
        Some(Ok(v)) => Some(format!("Warmed: {} left", v.remaining)),
        Some(Err(e)) => Some(e.message),
        None => None,
    };
    view! {
        <article class="flex flex-wrap items-center justify-between gap-2 rounded-lg bg-white p-3 shadow"
            aria-label=voucher.title.clone()>
            <h3 class="font-semibold">{format!("#{} {}", voucher.id, voucher.title)}</h3>
            <span class="text-xs text-slate-600">
                {format!("{} units, {} → {}", voucher.stock, voucher.begins_at.to_rfc3339(), voucher.ends_at.to_rfc3339())}
            </span>
            <p role="status" class="text-sm">{warm_message}</p>
            <button class="rounded border px-3 py-1 text-sm" on:click=move |_| { warm.dispatch(()); }>
                "Warm up"
            </button>
        </article>
    }
}

/// The log of one voucher, newest first, in a disclosure that loads it when opened.
/// Plain signals and a task, as the orders table beside it: resources and suspense
/// would add to every page's WASM.
#[component]
pub fn SaleLog(voucher_id: i64) -> impl IntoView {
    let entries = RwSignal::new(Vec::<AuditEntry>::new());
    let failed = RwSignal::new(None::<String>);
    let load = move || {
        leptos::task::spawn_local(async move {
            match list_audit(Some(voucher_id)).await {
                Ok(list) => {
                    entries.try_set(list);
                }
                Err(e) => {
                    failed.try_set(Some(e.message));
                }
            }
        })
    };
    view! {
        <details class="ml-3 text-sm" on:toggle=move |_| load()>
            <summary class="cursor-pointer">{format!("Log of #{voucher_id}")}</summary>
            <p role="alert">{move || failed.get()}</p>
            <ul class="mt-1 list-disc pl-5" aria-label=format!("Log of voucher #{voucher_id}")>
                {move || entries.get().into_iter().map(line).collect_view()}
            </ul>
        </details>
    }
}

/// One entry as a line: when (UTC), what, who, and the state it left.
fn line(e: AuditEntry) -> impl IntoView {
    let change = e.after.or(e.before).unwrap_or_default();
    // By hand: chrono's format engine stays out of the browser's bundle.
    let t = e.at;
    let when =
        format!("{}-{:02}-{:02} {:02}:{:02}:{:02} UTC", t.year(), t.month(), t.day(), t.hour(), t.minute(), t.second());
    view! { <li>{format!("{when} {} by {}: {change}", e.action, e.actor)}</li> }
}
