//! A sale's log on the admin page, loaded when opened.

use super::{api::list_audit, AuditEntry};
use chrono::{Datelike, Timelike};
use leptos::prelude::*;

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
