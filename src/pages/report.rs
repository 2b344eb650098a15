//! A sale's report (`/admin/report/<voucher id>`), for operators.

use super::admin::operators_only;
use crate::{browser::InBrowser, report::view::SaleReportView};
use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

#[component]
pub fn ReportPage() -> impl IntoView {
    let params = use_params_map();
    let id = params.with_untracked(|p| p.get("id").and_then(|id| id.parse::<i64>().ok()));
    view! {
        <h1 class="mb-4 text-2xl font-bold">"Sale report"</h1>
        <p class="mb-4"><a class="text-rose-700 underline" href="/admin">"Back to the admin board"</a></p>
        {match id {
            Some(voucher_id) => view! { <Report voucher_id/> }.into_any(),
            None => view! { <p role="alert">"No such sale."</p> }.into_any(),
        }}
    }
}

/// The report's island, in WASM of its own (see `admin::Operators`).
#[island(lazy)]
fn Report(voucher_id: i64) -> impl IntoView {
    view! {
        <InBrowser>{operators_only(move |_| view! { <SaleReportView voucher_id/> })}</InBrowser>
    }
}
