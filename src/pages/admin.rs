//! The operators' page (`/admin`): sign in by name and password or unlock with the
//! admin token; create and warm vouchers, watch every sale live, and each voucher's
//! orders.

use crate::{
    auth::{
        operator_api::admin_status,
        view::{OperatorPanel, OperatorsDoor},
    },
    browser::{every, InBrowser},
    live::view::LiveBoard,
    orders::view::VoucherOrders,
    sale::operator_view::{CreateVoucher, RowStates, SaleLog, SaleRow},
    voucher::{api::list_vouchers, view::EachVoucher, Voucher},
};
use leptos::prelude::*;

#[component]
pub fn OperatorsPage() -> impl IntoView {
    view! {
        <h1 class="mb-4 text-2xl font-bold">"Admin"</h1>
        <Operators/>
    }
    .into_any()
}

/// The page's island, in WASM of its own (`lazy`, built with `--split`): a shopper's
/// first load never carries the operators' code; an operator's browser fetches it when
/// the page opens.
#[island(lazy)]
fn Operators() -> impl IntoView {
    view! {
        <InBrowser>{operators_only(|unlocked| view! { <OperatorsBoard unlocked/> })}</InBrowser>
    }
}

/// `board` once the visitor is an operator (signed in, or holding the admin token);
/// the sign-in form until then. `board` is handed the flag, to lock the page again.
pub fn operators_only<V: IntoView + 'static>(
    board: impl Fn(RwSignal<bool>) -> V + Clone + Send + Sync + 'static,
) -> impl IntoView {
    let status = Resource::new(|| (), |_| admin_status());
    let unlocked = RwSignal::new(false);
    Effect::new(move |_| {
        if let Some(Ok(true)) = status.get() {
            unlocked.set(true);
        }
    });
    view! {
        <Show when=move || unlocked.get() fallback=move || view! { <OperatorsDoor unlocked/> }>
            {board(unlocked)}
        </Show>
    }
}

#[component]
fn OperatorsBoard(unlocked: RwSignal<bool>) -> impl IntoView {
    // The list (titles, windows) changes rarely; the numbers come from the live feed.
    let refresh = RwSignal::new(0u64);
    every(5000, move || refresh.update(|n| *n += 1));
    let vouchers =
        Resource::new(move || refresh.get(), |_| async { list_vouchers(None, None).await.map(|page| page.items) });
    let states = RowStates::new();
    // The rows' states (scheduled, live, ended) and which controls they show go by the
    // gate's clock, not the device's: an operator whose clock ran two hours fast saw a
    // live sale as ended, with no control to run it (a drill, 2026-11-30).
    let now = RwSignal::new(chrono::Utc::now());
    // The same, once the page has it (the new sale's pickers start from it).
    let gate_now = RwSignal::new(None::<chrono::DateTime<chrono::Utc>>);
    #[cfg(feature = "hydrate")]
    {
        // Four times a second: the first measurement shows within a quarter second.
        let clock = crate::sale::clock::GateClock::start(None);
        every(250, move || {
            let gate = clock.now();
            now.set(gate.unwrap_or_else(chrono::Utc::now));
            gate_now.set(gate);
        });
    }
    let titles = Signal::derive(move || {
        vouchers.get().and_then(Result::ok).unwrap_or_default().into_iter().map(|v| (v.id, v.title)).collect()
    });
    view! {
        <OperatorPanel/>
        <CreateVoucher refresh gate_now/>
        <LiveBoard titles unlocked/>
        <h2 class="mb-2 mt-6 text-xl font-semibold">"Vouchers"</h2>
        <EachVoucher vouchers=Signal::derive(move || vouchers.get()) class="grid gap-2" empty="No vouchers yet."
            item=move |v: Voucher| {
                // Looked up per list refresh: the row follows changes without being rebuilt.
                let id = v.id;
                let voucher = Memo::new(move |_| vouchers.get().and_then(Result::ok).and_then(|l| l.into_iter().find(|v| v.id == id)));
                view! {
                    <div><SaleRow id voucher now refresh states/><VoucherOrders voucher_id=id/><SaleLog voucher_id=id/></div>
                }.into_any()
            }/>
    }
    .into_any()
}
