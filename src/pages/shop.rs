//! The shopper's page (`/`): sign in, the sales with a countdown and live stock, grab,
//! and the shopper's orders to pay or cancel.
//!
//! The server renders the page; the browser hydrates one island, [`Shop`], which holds
//! what moves (the account box, each card's countdown, units left, Grab and result,
//! My orders). Only its code reaches a shopper's first load.

use crate::{
    auth::{api::Me, view::SignInBox, CurrentUser, User},
    browser::every,
    error::AppError,
    listing::Page,
    live::{view::use_shop_feed, StockLive},
    orders::view::MyOrders,
    sale::{
        clock::{use_server_clock, ServerClock},
        early,
        view::{LiveSale, SaleCard},
    },
    voucher::{api::ListVouchers, view::EachVoucher, Voucher},
    wire::{self, FromJson},
};
use leptos::{prelude::*, server_fn::ServerFn};
use std::collections::HashMap;

/// A listing, or why it could not be had.
type Listed = Result<Vec<Voucher>, AppError>;

/// The id of the script that carries [`ShopStart`] in the page.
const START_ID: &str = "shop-start";

/// What the shop's island starts from: the list the server rendered the page with (or
/// why it could not list) and the gate's time then. Carried in the page as JSON the
/// browser parses, not as the island's props: those bring serde's decoders into every
/// shopper's first load (`wire`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
struct ShopStart {
    vouchers: Vec<Voucher>,
    refusal: Option<AppError>,
    rendered_ms: Option<i64>,
}

impl FromJson for ShopStart {
    fn from_json(json: &impl wire::Json) -> Option<Self> {
        Some(Self {
            vouchers: Vec::from_json(&json.field("vouchers")?)?,
            refusal: json.maybe("refusal", AppError::from_json)?,
            rendered_ms: json.maybe("rendered_ms", wire::Json::int)?,
        })
    }
}

impl ShopStart {
    /// The start as the page has it: on the server, what [`ShopPage`] provided; in the
    /// browser, what the page carries (`None` when it is missing or unreadable: a page
    /// something rewrote on its way).
    fn here() -> Option<Self> {
        #[cfg(feature = "hydrate")]
        return web_sys::window()
            .and_then(|w| w.document()?.get_element_by_id(START_ID)?.text_content())
            .and_then(|json| wire::parse(&json));
        #[cfg(not(feature = "hydrate"))]
        use_context::<Self>()
    }

    /// As the page carries it: JSON, `<` written `\u003c` so that nothing in a title
    /// can close the script.
    #[cfg(feature = "ssr")]
    fn script(&self) -> String {
        serde_json::to_string(self).unwrap_or_default().replace('<', "\\u003c")
    }
}

#[component]
pub fn ShopPage() -> impl IntoView {
    view! {
        <h1 class="mb-4 text-2xl font-bold">"Flash sales"</h1>
        <Suspense>
            {Suspend::new(async {
                let (vouchers, refusal) = match crate::voucher::api::list_vouchers(None, None).await {
                    Ok(page) => (page.items, None),
                    Err(e) => (Vec::new(), Some(e)),
                };
                // The gate's time now, which the page's clock starts from.
                let rendered_ms = crate::sale::api::server_time(None).await.ok().map(|t| t.now_ms);
                let start = ShopStart { vouchers, refusal, rendered_ms };
                #[cfg(feature = "ssr")]
                let json = start.script();
                #[cfg(not(feature = "ssr"))]
                let json = String::new();
                provide_context(start);
                view! {
                    // Before the island: it must be listening when the first card is drawn.
                    // The line floats over the page's foot and lets taps through to it;
                    // empty, it is there for screen readers only (a live region must be
                    // in the page before what it says).
                    <p id=early::STATUS_ID role="status" aria-label="Your grab"
                        class="pointer-events-none fixed inset-x-4 bottom-4 z-10 whitespace-pre-line rounded bg-slate-900 px-4 py-2 text-sm text-white shadow empty:sr-only"></p>
                    <script data-gate=rendered_ms data-status=early::STATUS_ID inner_html=early::SCRIPT></script>
                    <script type="application/json" id=START_ID inner_html=json></script>
                    <Shop/>
                }
            })}
        </Suspense>
    }
}

/// Everything on the shop page that moves. It starts from the list the server rendered
/// the page with ([`ShopStart`]), lists again every 5 seconds (new sales appear) and
/// follows the live feed (stock, pause, end). Its calls and the feed are read without
/// serde (`wire`).
#[island]
fn Shop() -> impl IntoView {
    let start = ShopStart::here();
    // Before any card hydrates: from here on, Grab presses are the island's. Without
    // its start the island cannot draw the page's cards, so the page's script keeps
    // answering presses.
    if start.is_some() {
        early::take_over();
    } else {
        leptos::logging::warn!(
            "the shop's start ({START_ID}) is missing or unreadable: Grab stays with the page's script"
        );
    }
    let ShopStart { vouchers: listed, refusal, rendered_ms } = start.unwrap_or_default();
    let user = RwSignal::new(None::<User>);
    // Who is signed in is asked by the browser once the page is live, never rendered
    // by the server: the server's page is then the same for every visitor, and one
    // render serves them all (`server::page_cache`). The answer only fills an empty
    // box: a sign-in made while it was on its way wins.
    Effect::new(move |_| {
        leptos::task::spawn_local(async move {
            if let Ok(CurrentUser { user: Some(u) }) = wire::call(Me::PATH, wire::Args::new()).await {
                if user.try_get_untracked().flatten().is_none() {
                    user.try_set(Some(u));
                }
            }
        })
    });
    // The gate's clock, not the device's: a countdown and a Grab button that follow it.
    let clock = use_server_clock(rendered_ms);
    let now = clock.now;
    let vouchers = RwSignal::new(Some(refusal.map_or(Ok(listed), Err)));
    // New sales appear on the next list refresh; stock moves live. One listing at a
    // time: on a link slower than the period, answers neither pile up nor land out of
    // order (an older one over a newer).
    let listing = StoredValue::new(false);
    every(5000, move || {
        if listing.try_get_value() != Some(false) {
            return;
        }
        listing.set_value(true);
        leptos::task::spawn_local(async move {
            let answer = wire::call(ListVouchers::PATH, wire::Args::new()).await.map(|page: Page<Voucher>| page.items);
            vouchers.try_set(Some(answer));
            listing.try_set_value(false);
        })
    });
    let vouchers = Signal::from(vouchers);
    let live = use_shop_feed();
    // The account box and My orders are drawn once per sign-in, not again on every
    // change of who.
    let signed_in = Memo::new(move |_| user.with(Option::is_some));
    // Typed views, no `Show` or `Suspense` (each erases its children into an
    // `AnyView`, whose every way of drawing, async hydration included, comes into the
    // WASM): this island is every shopper's first load.
    view! {
        <SignInBox user signed_in/>
        <EachVoucher vouchers class="grid gap-4 sm:grid-cols-2" empty="No sales yet."
            item=move |v: Voucher| view! { <ShopCard id=v.id vouchers live clock/> }/>
        {move || signed_in.get().then(|| Suspend::new(my_orders(user, now)))}
    }
}

/// The shopper's orders in WASM of their own (`#[lazy]`, built with `--split`): a first
/// visit, signed out, does not download them; signing in fetches them.
#[lazy]
fn my_orders(user: RwSignal<Option<User>>, now: RwSignal<chrono::DateTime<chrono::Utc>>) -> AnyView {
    view! { <MyOrders user now/> }.into_any()
}

/// A sale card that follows the list as it refreshes (without being rebuilt) and the
/// live feed (stock, pause, end).
#[component]
fn ShopCard(
    id: i64,
    vouchers: Signal<Option<Listed>>,
    live: RwSignal<HashMap<i64, StockLive>>,
    clock: ServerClock,
) -> impl IntoView {
    // Looked up once per list refresh, not on every read (the countdown reads it every second).
    let voucher =
        Memo::new(move |_| vouchers.get().and_then(Result::ok).and_then(|l| l.into_iter().find(|v| v.id == id)));
    let live = Signal::derive(move || {
        live.with(|m| {
            m.get(&id).map(|l| LiveSale {
                left: l.left,
                sold_out: l.sold_out,
                paused: l.paused,
                begins_at_ms: l.begins_at_ms,
                ends_at_ms: l.ends_at_ms,
            })
        })
    });
    view! { <SaleCard id voucher live clock/> }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;
    use crate::{error::ErrorCode, sale::api::ServerTime, wire::round_trip};

    #[test]
    fn the_start_reads_back_and_cannot_close_its_script() {
        let voucher = Voucher::sample("</script><script>alert(1)</script>");
        let start = ShopStart { vouchers: vec![voucher], refusal: None, rendered_ms: Some(5) };
        assert_eq!(round_trip(&start), Some(start.clone()));
        assert!(!start.script().contains('<'));
        let read: serde_json::Value = serde_json::from_str(&start.script()).unwrap();
        assert_eq!(ShopStart::from_json(&read), Some(start));
        let refused = ShopStart { vouchers: vec![], refusal: Some(ErrorCode::Unavailable.into()), rendered_ms: None };
        assert_eq!(round_trip(&refused), Some(refused));
    }

    /// The island's calls without arguments are ones the server functions take.
    #[test]
    fn calls_without_arguments_are_taken() {
        let none = serde_json::json!({});
        assert!(serde_json::from_value::<Me>(none.clone()).is_ok());
        assert!(serde_json::from_value::<ListVouchers>(none.clone()).is_ok());
        assert!(serde_json::from_value::<ServerTime>(none).is_ok());
    }
}
