//! The operator's sale components: the form that puts a new voucher on sale, a
//! sale's row with everything that runs it (state, warm up, pause, resume, end, stock
//! added and withdrawn, an edit form), and its log (the admin page lists them). Times
//! are shown and picked in the operator's time zone; the API keeps RFC 3339.

use super::{
    launch::{create_voucher, warm_up},
    run::{add_stock, end_sale, list_audit, pause_sale, resume_sale, update_voucher, withdraw_stock},
};
use crate::{
    audit::{view::log_line, AuditEntry},
    browser::{from_local_input, local_input, local_time},
    error::{AppError, AppResult},
    money,
    voucher::{api::shop_settings, SaleState, Voucher},
};
use chrono::{DateTime, Duration, SubsecRound, Utc};
use leptos::prelude::*;

/// The shop's currency, once the server has said it (EUR until then).
fn use_currency() -> RwSignal<String> {
    let currency = RwSignal::new("EUR".to_owned());
    Effect::new(move |_| {
        leptos::task::spawn_local(async move {
            if let Ok(settings) = shop_settings().await {
                currency.try_set(settings.currency);
            }
        })
    });
    currency
}

/// An amount as typed, in minor units of `currency`.
fn amount(field: &str, text: &str, currency: &str) -> AppResult<i64> {
    money::parse(text, currency)
        .ok_or_else(|| AppError::invalid(format!("{field} must be an amount like 19.99 ({currency}).")))
}

/// A picked date-time as RFC 3339.
fn picked(field: &str, text: &str) -> AppResult<String> {
    from_local_input(text).map(|t| t.to_rfc3339()).ok_or_else(|| AppError::invalid(format!("Pick {field}.")))
}

/// One labelled input of a form.
fn field(id: String, label: &'static str, kind: &'static str, value: RwSignal<String>, hint: String) -> impl IntoView {
    let hint_id = format!("{id}-hint");
    view! {
        <div class="flex flex-col text-sm">
            <label for=id.clone()>{label}</label>
            <input id=id class="min-h-11 rounded border px-2 py-1" type=kind bind:value=value
                aria-describedby=hint_id.clone()/>
            <span id=hint_id class="text-xs text-slate-600">{hint}</span>
        </div>
    }
}

/// The form that puts a new voucher on sale; bumps `refresh` when one was created.
/// `gate_now`: the gate's time, once the page has it.
#[component]
pub fn CreateVoucher(refresh: RwSignal<u64>, gate_now: RwSignal<Option<DateTime<Utc>>>) -> impl IntoView {
    let currency = use_currency();
    let title = RwSignal::new(String::new());
    let stock = RwSignal::new("100".to_owned());
    let price = RwSignal::new("0".to_owned());
    let face_value = RwSignal::new(String::new());
    let begins = RwSignal::new(String::new());
    let ends = RwSignal::new(String::new());
    let shards = RwSignal::new("1".to_owned());
    // On by default here (the API's default stays off, for the clients it had).
    let fair = RwSignal::new(true);
    // The pickers start at the gate's now and an hour later, in the operator's zone,
    // once the page has the gate's time: the device's may be hours off (it was the
    // default until a drill, 2026-11-30: a device two hours fast proposed a sale two
    // hours late). Once: what the operator picks is theirs.
    Effect::new(move |seeded: Option<bool>| {
        if seeded == Some(true) {
            return true;
        }
        let Some(start) = gate_now.get() else { return false };
        let start = start.trunc_subsecs(0);
        begins.set(local_input(start));
        ends.set(local_input(start + Duration::hours(1)));
        true
    });
    let result = RwSignal::new(None::<AppResult<Voucher>>);
    // One call at a time: a double click, or Enter pressed again, made a second sale.
    let busy = RwSignal::new(false);
    let create = move || {
        if busy.get_untracked() {
            return;
        }
        busy.set(true);
        let (t, s, p, f, b, e) = (title.get(), stock.get(), price.get(), face_value.get(), begins.get(), ends.get());
        let (fair, k) = (fair.get(), shards.get());
        let currency = currency.get_untracked();
        leptos::task::spawn_local(async move {
            let answer = async {
                let stock = s.trim().parse::<i64>().map_err(|_| AppError::invalid("Stock must be a whole number."))?;
                let price = amount("Price", &p, &currency)?;
                // Left blank: worth what it costs.
                let face = if f.trim().is_empty() { None } else { Some(amount("Face value", &f, &currency)?) };
                let (b, e) = (picked("a start", &b)?, picked("an end", &e)?);
                let k = k.trim().parse::<i64>().map_err(|_| AppError::invalid("Shards must be a whole number."))?;
                create_voucher(t, stock, b, e, Some(price), face, Some(fair), Some(k)).await
            };
            let answer = answer.await;
            if answer.is_ok() {
                refresh.update(|n| *n += 1);
            }
            result.try_set(Some(answer));
            busy.try_set(false);
        })
    };
    let message = move || match result.get() {
        Some(Ok(v)) => Some(format!("Created voucher #{}: {}", v.id, v.title)),
        Some(Err(e)) => Some(e.message),
        None => None,
    };
    let in_currency = move |what: &str| format!("{what}, in {}", currency.get());
    view! {
        <form class="grid gap-3 rounded-lg bg-white p-4 shadow sm:grid-cols-2" aria-label="New voucher"
            on:submit=move |ev| {
                ev.prevent_default();
                create();
            }>
            {field("voucher-title".into(), "Title", "text", title, "Up to 100 characters".into())}
            {field("voucher-stock".into(), "Stock", "text", stock, "1 to 1,000,000 units".into())}
            {move || field("voucher-price".into(), "Price", "text", price, in_currency("What a shopper pays"))}
            {move || field("voucher-face".into(), "Face value", "text", face_value, in_currency("What it is worth; blank: the price"))}
            {field("voucher-begins".into(), "Starts at", "datetime-local", begins, "Your time zone".into())}
            {field("voucher-ends".into(), "Ends at", "datetime-local", ends, "After the start".into())}
            {field("voucher-shards".into(), "Shards", "text", shards, "1 to 64 Redis buckets; more for a sale past one Redis core".into())}
            <label class="flex min-h-11 items-center gap-2 text-sm sm:col-span-2">
                <input type="checkbox" bind:checked=fair/>
                "Fair start: grabs need a token given from the start instant (stops scripts firing early)"
            </label>
            <div class="flex items-center gap-3 sm:col-span-2">
                <button class="min-h-11 rounded bg-rose-600 px-4 py-1 text-white disabled:opacity-50" type="submit"
                    disabled=move || busy.get()>"Create voucher"</button>
                <p role="status">{message}</p>
            </div>
        </form>
    }
}

/// What each sale row holds besides the sale: what it last said, whether End waits
/// for its confirmation, the units typed, the edit form. Kept by the board, not by
/// the rows: the list refreshes every few seconds and after each change, and a row
/// drawn again must not forget a message, an open form or what was typed into it.
#[derive(Clone, Copy)]
pub struct RowStates {
    owner: StoredValue<Option<Owner>>,
    rows: StoredValue<std::collections::HashMap<i64, RowState>>,
}

#[derive(Clone, Copy)]
struct RowState {
    said: RwSignal<Option<String>>,
    /// A call of the row's is under way: its buttons wait (a double click added or
    /// withdrew the units twice).
    busy: RwSignal<bool>,
    confirm_end: RwSignal<bool>,
    units: RwSignal<String>,
    edit_open: RwSignal<bool>,
    /// The sale as it was when the form was opened: what "changed" is measured from,
    /// so a save never sends back fields another operator changed meanwhile.
    base: RwSignal<Option<Voucher>>,
    title: RwSignal<String>,
    price: RwSignal<String>,
    face: RwSignal<String>,
    begins: RwSignal<String>,
    ends: RwSignal<String>,
}

impl RowStates {
    /// Made by the board: the rows' state lives as long as it does.
    pub fn new() -> Self {
        Self { owner: StoredValue::new(Owner::current()), rows: StoredValue::new(Default::default()) }
    }

    fn of(&self, id: i64) -> RowState {
        if let Some(state) = self.rows.with_value(|rows| rows.get(&id).copied()) {
            return state;
        }
        let text = || RwSignal::new(String::new());
        let make = || RowState {
            said: RwSignal::new(None),
            busy: RwSignal::new(false),
            confirm_end: RwSignal::new(false),
            units: RwSignal::new("10".to_owned()),
            edit_open: RwSignal::new(false),
            base: RwSignal::new(None),
            title: text(),
            price: text(),
            face: text(),
            begins: text(),
            ends: text(),
        };
        let state = self.owner.with_value(|owner| owner.as_ref().map_or_else(make, |o| o.with(make)));
        self.rows.update_value(|rows| {
            rows.insert(id, state);
        });
        state
    }
}

impl RowState {
    /// Marks a call of the row's under way; false when one already is.
    fn start(&self) -> bool {
        if self.busy.get_untracked() {
            return false;
        }
        self.busy.set(true);
        true
    }
}

impl Default for RowStates {
    fn default() -> Self {
        Self::new()
    }
}

/// One sale and what runs it: its state, price and window, Warm up, Pause / Resume,
/// End (asked twice), stock added and withdrawn, and an edit form. Follows the list as
/// it refreshes; bumps `refresh` after each change.
#[component]
pub fn SaleRow(
    id: i64,
    #[prop(into)] voucher: Signal<Option<Voucher>>,
    now: RwSignal<DateTime<Utc>>,
    refresh: RwSignal<u64>,
    states: RowStates,
) -> impl IntoView {
    let row = states.of(id);
    let (said, confirm_end, units, busy) = (row.said, row.confirm_end, row.units, row.busy);
    // Runs one call and says how it went; none while another of the row's runs.
    let act = move |call: std::pin::Pin<Box<dyn std::future::Future<Output = AppResult<String>>>>| {
        if !row.start() {
            return;
        }
        leptos::task::spawn_local(async move {
            let text = call.await.unwrap_or_else(|e| e.message);
            said.try_set(Some(text));
            busy.try_set(false);
            refresh.try_update(|n| *n += 1);
        })
    };
    let state = Signal::derive(move || voucher.get().map(|v| v.state(now.get(), None)));
    let title = move || voucher.get().map(|v| v.title).unwrap_or_default();
    let summary = move || {
        voucher.get().map(|v| {
            let price =
                format!("{} (worth {})", money::format(v.price, &v.currency), money::format(v.face_value, &v.currency));
            let window = format!("{} → {}", local_time(v.begins_at), local_time(v.ends_at));
            format!("{price}; {} of {} units left; {window}", v.remaining, v.stock)
        })
    };
    let units_of = move || {
        units.get_untracked().trim().parse::<i64>().map_err(|_| AppError::invalid("Units must be a whole number."))
    };
    let warm =
        move |_| act(Box::pin(async move { warm_up(id).await.map(|v| format!("Warmed: {} left", v.remaining)) }));
    let pause = move |_| act(Box::pin(async move { pause_sale(id).await.map(|_| "Paused".to_owned()) }));
    let resume = move |_| act(Box::pin(async move { resume_sale(id).await.map(|_| "Resumed".to_owned()) }));
    let end = move |_| {
        confirm_end.set(false);
        act(Box::pin(async move { end_sale(id).await.map(|_| "Ended".to_owned()) }))
    };
    let add = move |_| {
        let n = units_of();
        act(Box::pin(async move { add_stock(id, n?).await.map(|c| format!("Added {} units", c.units)) }))
    };
    let withdraw = move |_| {
        let n = units_of();
        act(Box::pin(async move { withdraw_stock(id, n?).await.map(|c| format!("Withdrew {} units", c.units)) }))
    };
    let button = "min-h-11 rounded border px-3 py-1 text-sm disabled:opacity-50";
    let waiting = move || busy.get();
    view! {
        <article class="rounded-lg bg-white p-3 shadow" aria-label=title>
            <div class="flex flex-wrap items-center gap-2">
                <h3 class="font-semibold">{move || format!("#{id} {}", title())}</h3>
                <span class="rounded-full bg-slate-200 px-2 text-xs font-semibold" data-testid="sale-state">
                    {move || state.get().map(SaleState::label)}
                </span>
            </div>
            <p class="text-xs text-slate-600">{summary}</p>
            <div class="mt-2 flex flex-wrap items-center gap-2" role="group" aria-label=format!("Run sale #{id}")>
                <button class=button on:click=warm disabled=waiting>"Warm up"</button>
                <a class=format!("{button} inline-flex items-center") href=crate::report::page_path(id)>"Report"</a>
                <Show when=move || state.get() != Some(SaleState::Ended)>
                    <Show when=move || voucher.get().is_some_and(|v| v.paused)
                        fallback=move || view! { <button class=button on:click=pause disabled=waiting>"Pause"</button> }>
                        <button class=button on:click=resume disabled=waiting>"Resume"</button>
                    </Show>
                    <Show when=move || confirm_end.get()
                        fallback=move || view! {
                            <button class=button on:click=move |_| confirm_end.set(true)>"End sale"</button>
                        }>
                        <button class="min-h-11 rounded bg-rose-700 px-3 py-1 text-sm text-white" on:click=end disabled=waiting>
                            "Confirm: end now"
                        </button>
                        <button class=button on:click=move |_| confirm_end.set(false)>"Keep it on"</button>
                    </Show>
                    <label class="text-sm" for=format!("units-{id}")>"Units"</label>
                    <input id=format!("units-{id}") class="min-h-11 w-20 rounded border px-2" type="number" min="1"
                        bind:value=units/>
                    <button class=button on:click=add disabled=waiting>"Add units"</button>
                    <button class=button on:click=withdraw disabled=waiting>"Withdraw units"</button>
                </Show>
            </div>
            <p role="status" class="text-sm">{move || said.get()}</p>
            <Show when=move || state.get() != Some(SaleState::Ended)>
                <EditSale id voucher row refresh/>
            </Show>
        </article>
    }
}

/// The edit form of one sale, in a disclosure; its fields start from the sale as it
/// is when opened. Sends only what changed.
#[component]
fn EditSale(id: i64, voucher: Signal<Option<Voucher>>, row: RowState, refresh: RwSignal<u64>) -> impl IntoView {
    let RowState { said, busy, edit_open, base, title, price, face, begins, ends, .. } = row;
    let toggled = move |ev: leptos::ev::Event| {
        let open = event_target::<leptos::web_sys::HtmlDetailsElement>(&ev).open();
        if open && !edit_open.get_untracked() {
            base.set(voucher.get_untracked());
            if let Some(v) = voucher.get_untracked() {
                title.set(v.title.clone());
                price.set(money::plain(v.price, &v.currency));
                face.set(money::plain(v.face_value, &v.currency));
                begins.set(local_input(v.begins_at));
                ends.set(local_input(v.ends_at));
            }
        }
        edit_open.set(open);
    };
    let save = move || {
        let Some(v) = base.get_untracked() else { return };
        if !row.start() {
            return;
        }
        let typed = (title.get_untracked(), price.get_untracked(), face.get_untracked());
        let (b, e) = (begins.get_untracked(), ends.get_untracked());
        leptos::task::spawn_local(async move {
            let answer = async {
                let (t, p, f) = typed;
                let changed = |new: String, old: String| (new.trim() != old).then_some(new);
                let price = amount("Price", &p, &v.currency)?;
                let face = amount("Face value", &f, &v.currency)?;
                let begins = changed(b, local_input(v.begins_at)).map(|b| picked("a start", &b)).transpose()?;
                let ends = changed(e, local_input(v.ends_at)).map(|e| picked("an end", &e)).transpose()?;
                let title = changed(t, v.title.clone());
                let (price, face) = ((price != v.price).then_some(price), (face != v.face_value).then_some(face));
                update_voucher(id, title, price, face, begins, ends).await
            };
            let text = match answer.await {
                Ok(v) => format!("Saved: {}", v.title),
                Err(e) => e.message,
            };
            said.try_set(Some(text));
            busy.try_set(false);
            refresh.try_update(|n| *n += 1);
        })
    };
    view! {
        <details class="mt-2 text-sm" prop:open=move || edit_open.get() on:toggle=toggled>
            <summary class="cursor-pointer">{format!("Edit #{id}")}</summary>
            <form class="mt-2 grid gap-2 sm:grid-cols-2" aria-label=format!("Edit sale #{id}")
                on:submit=move |ev| {
                    ev.prevent_default();
                    save();
                }>
                {field(format!("edit-title-{id}"), "New title", "text", title, String::new())}
                {field(format!("edit-price-{id}"), "New price", "text", price, "Applies to grabs from now on".into())}
                {field(format!("edit-face-{id}"), "New face value", "text", face, String::new())}
                {field(format!("edit-begins-{id}"), "New start", "datetime-local", begins, "Only before the sale starts".into())}
                {field(format!("edit-ends-{id}"), "New end", "datetime-local", ends, "Not before now".into())}
                <div class="sm:col-span-2">
                    <button class="min-h-11 rounded bg-rose-600 px-4 py-1 text-white disabled:opacity-50" type="submit"
                        disabled=move || busy.get()>"Save changes"</button>
                </div>
            </form>
        </details>
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
            match list_audit(Some(voucher_id), None, None).await {
                Ok(page) => {
                    entries.try_set(page.items);
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
                {move || entries.get().into_iter().map(log_line).collect_view()}
            </ul>
        </details>
    }
}
