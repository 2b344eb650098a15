//! A sale's log on the admin page, loaded when opened.

use super::{api::list_audit, AuditEntry};
use chrono::{Datelike, Timelike};
use leptos::prelude::*;

/// The log of one voucher, newest first, in a disclosure that loads it when opened.
#[component]
pub fn SaleLog(voucher_id: i64) -> impl IntoView {
    let open = RwSignal::new(false);
    let entries = Resource::new(
        move || open.get(),
        move |open| async move {
            if open {
                list_audit(Some(voucher_id)).await
            } else {
                Ok(Vec::new())
            }
        },
    );
    let line = |e: AuditEntry| {
        let change = e.after.or(e.before).unwrap_or_default();
        // By hand: chrono's format engine stays out of the browser's bundle.
        let t = e.at;
        let when = format!(
            "{}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
            t.year(),
            t.month(),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        );
        view! { <li>{format!("{when} {} by {}: {change}", e.action, e.actor)}</li> }
    };
    view! {
        <details class="text-sm" on:toggle=move |_| open.set(true)>
            <summary class="cursor-pointer">{format!("Log of #{voucher_id}")}</summary>
            <Suspense fallback=|| view! { <p>"Loading…"</p> }>
                <ul class="mt-1 list-disc pl-5" aria-label=format!("Log of voucher #{voucher_id}")>
                    {move || entries.get().map(|r| match r {
                        Ok(list) => list.into_iter().map(line).collect_view().into_any(),
                        Err(e) => view! { <li role="alert">{e.message}</li> }.into_any(),
                    })}
                </ul>
            </Suspense>
        </details>
    }
}
