//! The shopper's "My orders" panel (status, a countdown to the payment deadline, Pay
//! and Cancel) and the operator's orders table per voucher.

use super::{api::list_orders, Order, OrderStatus};
use crate::browser::every;
use leptos::prelude::*;
#[cfg(feature = "hydrate")]
use {
    super::{
        api::{cancel_order, my_orders, pay_order},
        CancelReason,
    },
    crate::{
        auth::User,
        browser::clock,
        error::{AppError, ErrorCode},
    },
    chrono::{DateTime, Utc},
};

/// What an order's status says to people.
#[cfg(feature = "hydrate")]
pub fn status_text(order: &Order, now: DateTime<Utc>) -> String {
    match (order.status, order.cancel_reason) {
        (OrderStatus::Unpaid, _) if now < order.pay_deadline => {
            let left = (order.pay_deadline - now).num_milliseconds().max(0);
            format!("Unpaid: pay within {}", clock((left + 999) / 1000))
        }
        (OrderStatus::Unpaid, _) => "Unpaid: payment time is up".to_owned(),
        (OrderStatus::Paid, _) => "Paid".to_owned(),
        (OrderStatus::Cancelled, Some(CancelReason::Timeout)) => "Cancelled: not paid in time".to_owned(),
        (OrderStatus::Cancelled, _) => "Cancelled by you".to_owned(),
    }
}

/// The signed-in shopper's orders (into `orders`, which the shop's cards read too),
/// refreshed every 2 seconds and after each action. Pay and Cancel wait while one is
/// on its way (on a slow link, a second press would be a second call), and what it
/// answers is shown at once. Plain signals and tasks rather than resources and
/// actions: this panel is on every shopper's page, and every generic view helper adds
/// to the WASM they download.
#[cfg(feature = "hydrate")]
#[component]
pub fn MyOrders(
    user: RwSignal<Option<User>>,
    now: RwSignal<DateTime<Utc>>,
    orders: RwSignal<Vec<Order>>,
) -> impl IntoView {
    let message = RwSignal::new(None::<String>);
    // The order whose Pay or Cancel is on its way.
    let busy = RwSignal::new(None::<String>);
    // A session ended elsewhere (signed out in another tab, everywhere, a password
    // changed) signs the page out: it shows the sign-in form again, not a list it
    // cannot refresh and Pay buttons that cannot work (a drill, 2026-11-30).
    let ended = move |e: &AppError| {
        if e.code == ErrorCode::NotSignedIn {
            user.try_set(None);
        }
    };
    // Counts answered actions: a list asked for before one was answered is older
    // than what it answered, and is not shown over it.
    let acted = RwSignal::new(0u32);
    let load = move || {
        // Gone once the panel is (signed out while an answer was on its way).
        let Some(asked) = acted.try_get_untracked() else { return };
        leptos::task::spawn_local(async move {
            match my_orders(None, None).await {
                Ok(page) if acted.try_get_untracked() == Some(asked) => _ = orders.try_set(page.items),
                Ok(_) => {}
                Err(e) => ended(&e),
            }
        })
    };
    Effect::new(move |_| match user.get() {
        Some(_) => load(),
        None => orders.set(Vec::new()),
    });
    every(2000, move || {
        if user.try_get_untracked().flatten().is_some() {
            load();
        }
    });
    let act = move |order_id: String, pay: bool| {
        if busy.try_get_untracked().flatten().is_some() {
            return;
        }
        busy.set(Some(order_id.clone()));
        leptos::task::spawn_local(async move {
            let done = if pay { pay_order(order_id).await } else { cancel_order(order_id).await };
            match done {
                Ok(order) => {
                    orders.try_update(|list| {
                        list.iter_mut().filter(|o| o.order_id == order.order_id).for_each(|o| *o = order.clone())
                    });
                    message.try_set(None);
                }
                Err(e) => {
                    ended(&e);
                    message.try_set(Some(e.message));
                }
            }
            busy.try_set(None);
            if acted.try_update(|n| *n += 1).is_some() {
                load();
            }
        })
    };
    view! {
        <section class="mt-6" aria-labelledby="my-orders" hidden=move || user.get().is_none()>
            <h2 id="my-orders" class="mb-2 text-xl font-semibold">"My orders"</h2>
            <p role="alert" class="text-sm text-red-700">{move || message.get()}</p>
            <p hidden=move || !orders.with(Vec::is_empty)>"No orders yet."</p>
            <ul class="grid gap-2">
                {move || orders.get().into_iter().map(|o| order_item(o, now, busy, act)).collect_view()}
            </ul>
        </section>
    }
    .into_any()
}

/// One order: title, id, price, status with the time left to pay, and Pay / Cancel while open.
#[cfg(feature = "hydrate")]
fn order_item(
    order: Order,
    now: RwSignal<DateTime<Utc>>,
    busy: RwSignal<Option<String>>,
    act: impl Fn(String, bool) + Copy + 'static,
) -> impl IntoView {
    let (id, deadline) = (order.order_id.clone(), order.pay_deadline);
    let unpaid = order.status == OrderStatus::Unpaid;
    let closed = move || !unpaid || now.get() >= deadline;
    let waiting = move || busy.with(Option::is_some);
    let this = id.clone();
    let paying = move || busy.with(|b| b.as_ref() == Some(&this));
    let (pay_id, cancel_id, label) = (id.clone(), id.clone(), format!("Order {id}"));
    view! {
        <li class="flex flex-wrap items-center gap-3 rounded-lg bg-white p-3 shadow" aria-label=label>
            <span class="font-semibold">{order.title.clone()}</span>
            <span class="font-mono text-sm">{id}</span>
            <span>{crate::money::format(order.price, &order.currency)}</span>
            <span role="status">{move || status_text(&order, now.get())}</span>
            <button class="rounded bg-emerald-700 px-3 min-h-11 min-w-11 py-1 text-white disabled:opacity-50" hidden=closed
                disabled=waiting aria-busy=move || paying().then_some("true")
                on:click=move |_| act(pay_id.clone(), true)>"Pay"</button>
            <button class="rounded border px-3 min-h-11 min-w-11 py-1 disabled:opacity-50" hidden=closed
                disabled=waiting on:click=move |_| act(cancel_id.clone(), false)>"Cancel"</button>
        </li>
    }
}

/// A voucher's newest orders (operators), behind a disclosure; loaded and refreshed every
/// 3 seconds while open.
#[component]
pub fn VoucherOrders(voucher_id: i64) -> impl IntoView {
    let open = RwSignal::new(false);
    let rows = RwSignal::new(Vec::<Order>::new());
    let load = move || {
        leptos::task::spawn_local(async move {
            if let Ok(page) = list_orders(voucher_id, None, Some(50), None).await {
                rows.try_set(page.items);
            }
        })
    };
    every(3000, move || {
        if open.try_get_untracked() == Some(true) {
            load();
        }
    });
    let count = move |status: OrderStatus| move || rows.with(|r| r.iter().filter(|o| o.status == status).count());
    view! {
        <details class="ml-3 text-sm" on:toggle=move |_| {
            open.update(|o| *o = !*o);
            load();
        }>
            <summary class="cursor-pointer">{format!("Orders of voucher #{voucher_id}")}</summary>
            <table class="w-full text-left text-sm">
                <caption class="text-left text-slate-700">
                    "Newest 50: " {count(OrderStatus::Unpaid)} " unpaid, " {count(OrderStatus::Paid)} " paid, "
                    {count(OrderStatus::Cancelled)}
                    " cancelled"
                </caption>
                <thead><tr><th scope="col">"Order"</th><th scope="col">"User"</th><th scope="col">"Status"</th></tr></thead>
                <tbody>
                    {move || rows.get().into_iter().map(|o| {
                        let status = match o.cancel_reason {
                            Some(r) => format!("{} ({})", o.status.as_str(), r.as_str()),
                            None => o.status.as_str().to_owned(),
                        };
                        view! { <tr><td class="font-mono">{o.order_id}</td><td>{o.user_id}</td><td>{status}</td></tr> }
                    }).collect_view()}
                </tbody>
            </table>
        </details>
    }
    .into_any()
}
