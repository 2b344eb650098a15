//! The shopper's "My orders" panel (status, a countdown to the payment deadline, Pay
//! and Cancel) and the operator's orders table per voucher.

use super::{
    api::{cancel_order, list_orders, my_orders, pay_order},
    Order,
};
use crate::{auth::User, browser::every, sale::view::clock};
use chrono::{DateTime, Utc};
use leptos::prelude::*;

/// What an order's status says to people.
pub fn status_text(order: &Order, now: DateTime<Utc>) -> String {
    match (order.status.as_str(), order.cancel_reason.as_deref()) {
        ("unpaid", _) if now < order.pay_deadline => {
            let left = (order.pay_deadline - now).num_milliseconds().max(0);
            format!("Unpaid: pay within {}", clock((left + 999) / 1000))
        }
        ("unpaid", _) => "Unpaid: payment time is up".to_owned(),
        ("paid", _) => "Paid".to_owned(),
        (_, Some("timeout")) => "Cancelled: not paid in time".to_owned(),
        _ => "Cancelled by you".to_owned(),
    }
}

/// The signed-in shopper's orders, refreshed every 2 seconds.
#[component]
pub fn MyOrders(user: RwSignal<Option<User>>, now: RwSignal<DateTime<Utc>>) -> impl IntoView {
    let refresh = RwSignal::new(0u64);
    every(2000, move || refresh.update(|n| *n += 1));
    let orders = Resource::new(
        move || (user.get().map(|u| u.user_id), refresh.get()),
        |(user, _)| async move {
            match user {
                Some(_) => my_orders().await,
                None => Ok(Vec::new()),
            }
        },
    );
    let list = move || orders.get().and_then(Result::ok).unwrap_or_default();
    view! {
        <Show when=move || user.get().is_some()>
            <section class="mt-6" aria-labelledby="my-orders">
                <h2 id="my-orders" class="mb-2 text-xl font-semibold">"My orders"</h2>
                <Show when=move || !list().is_empty() fallback=|| view! { <p>"No orders yet."</p> }>
                    <ul class="grid gap-2">
                        <For each=list key=|o| (o.order_id.clone(), o.status.clone()) let(order)>
                            <OrderItem order now refresh/>
                        </For>
                    </ul>
                </Show>
            </section>
        </Show>
    }
    .into_any()
}

#[component]
fn OrderItem(order: Order, now: RwSignal<DateTime<Utc>>, refresh: RwSignal<u64>) -> impl IntoView {
    let id = order.order_id.clone();
    let pay = Action::new({
        let id = id.clone();
        move |_: &()| pay_order(id.clone())
    });
    let cancel = Action::new({
        let id = id.clone();
        move |_: &()| cancel_order(id.clone())
    });
    let refusal = RwSignal::new(None::<String>);
    Effect::new(move |_| {
        for done in [pay.value().get(), cancel.value().get()].into_iter().flatten() {
            match done {
                Ok(_) => refresh.update(|n| *n += 1),
                Err(e) => refusal.set(Some(e.message)),
            }
        }
    });
    let open = {
        let deadline = order.pay_deadline;
        let unpaid = order.status == "unpaid";
        move || unpaid && now.get() < deadline
    };
    let busy = move || pay.pending().get() || cancel.pending().get();
    let status = {
        let order = order.clone();
        move || status_text(&order, now.get())
    };
    view! {
        <li class="flex flex-wrap items-center gap-3 rounded-lg bg-white p-3 shadow" aria-label=format!("Order {id}")>
            <span class="font-semibold">{order.title.clone()}</span>
            <span class="font-mono text-sm">{id.clone()}</span>
            <span role="status">{status}</span>
            <Show when=open>
                <button class="rounded bg-emerald-700 px-3 py-1 text-white disabled:opacity-50"
                    disabled=busy on:click=move |_| { pay.dispatch(()); }>"Pay"</button>
                <button class="rounded border px-3 py-1 disabled:opacity-50"
                    disabled=busy on:click=move |_| { cancel.dispatch(()); }>"Cancel"</button>
            </Show>
            <span role="alert" class="text-sm text-red-700">{move || refusal.get()}</span>
        </li>
    }
    .into_any()
}

/// A voucher's newest orders (admin), behind a disclosure; loaded and refreshed every
/// 3 seconds while open.
#[component]
pub fn VoucherOrders(voucher_id: i64) -> impl IntoView {
    let open = RwSignal::new(false);
    let refresh = RwSignal::new(0u64);
    every(3000, move || refresh.update(|n| *n += 1));
    let orders = Resource::new(
        move || (open.get(), refresh.get()),
        move |(open, _)| async move {
            match open {
                true => list_orders(voucher_id, None, Some(50)).await,
                false => Ok(Vec::new()),
            }
        },
    );
    let rows = move || orders.get().and_then(Result::ok).unwrap_or_default();
    let count = move |status: &'static str| move || rows().iter().filter(|o| o.status == status).count();
    view! {
        <details class="ml-3 text-sm" on:toggle=move |_| open.update(|o| *o = !*o)>
        <summary class="cursor-pointer">{format!("Orders of voucher #{voucher_id}")}</summary>
        <table class="w-full text-left text-sm">
            <caption class="text-left text-slate-700">
                "Newest 50: " {count("unpaid")} " unpaid, " {count("paid")} " paid, " {count("cancelled")} " cancelled"
            </caption>
            <thead><tr><th scope="col">"Order"</th><th scope="col">"User"</th><th scope="col">"Status"</th></tr></thead>
            <tbody>
                <For each=rows key=|o| (o.order_id.clone(), o.status.clone()) let(o)>
                    <tr>
                        <td class="font-mono">{o.order_id}</td>
                        <td>{o.user_id}</td>
                        <td>{o.status}{o.cancel_reason.map(|r| format!(" ({r})"))}</td>
                    </tr>
                </For>
            </tbody>
        </table>
        </details>
    }
    .into_any()
}
