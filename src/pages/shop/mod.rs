//! The shopper's page (`/`): sign in, the sales with a countdown and live stock, grab,
//! and the shopper's orders to pay or cancel.
//!
//! The server draws the whole page; the browser does not draw it again. One island,
//! [`Shop`], holds no view of its own: it paints what moves into what the server drew
//! (`browser`: each card's countdown, units left, Grab and result; the account box)
//! and mounts the parts only a signed-in shopper sees (the account menu, My orders),
//! each in WASM of its own. So a shopper's first load carries the few kilobytes that
//! change text in place, not a renderer and a reactive view of the page.

#[cfg(feature = "hydrate")]
mod browser;

use crate::{
    auth::account_box::SignInBox,
    error::AppError,
    sale::{
        early,
        view::{sale_card, CardView},
    },
    voucher::Voucher,
    wire::{self, FromJson},
};
use leptos::prelude::*;

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
    /// The start as the page carries it (`None` when it is missing or unreadable: a
    /// page something rewrote on its way).
    #[cfg(feature = "hydrate")]
    fn here() -> Option<Self> {
        let json = document().get_element_by_id(ids::START)?.text_content()?;
        wire::parse(&json)
    }

    /// As the page carries it: JSON, `<` written `\u003c` so that nothing in a title
    /// can close the script.
    #[cfg(feature = "ssr")]
    fn script(&self) -> String {
        serde_json::to_string(self).unwrap_or_default().replace('<', "\\u003c")
    }
}

/// The ids and parts of the page the island paints.
mod ids {
    /// The script that carries [`super::ShopStart`].
    pub const START: &str = "shop-start";
    /// The list of sales: its grid of cards, what it says when empty or refused.
    pub const SALES: &str = "sales";
    pub const GRID: &str = "grid";
    pub const EMPTY: &str = "empty";
    pub const REFUSED: &str = "refused";
    /// An empty card, which a sale listed later is drawn from.
    pub const CARD_TEMPLATE: &str = "card-template";
    /// Where My orders is drawn for a signed-in shopper.
    pub const ORDERS: &str = "my-orders-slot";
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
                view! {
                    // Before the cards: the page's script must be listening when the
                    // first card is drawn. The line floats over the page's foot and lets
                    // taps through to it; empty, it is there for screen readers only (a
                    // live region must be in the page before what it says).
                    <p id=early::STATUS_ID role="status" aria-label="Your grab"
                        class="pointer-events-none fixed inset-x-4 bottom-4 z-10 whitespace-pre-line rounded bg-slate-900 px-4 py-2 text-sm text-white shadow empty:sr-only"></p>
                    <script data-gate=rendered_ms data-status=early::STATUS_ID inner_html=early::SCRIPT></script>
                    <script type="application/json" id=ids::START inner_html=json></script>
                    <SignInBox/>
                    {sales(start)}
                    <template id=ids::CARD_TEMPLATE>{sale_card(0, CardView::default())}</template>
                    <div id=ids::ORDERS></div>
                    <Shop/>
                }
            })}
        </Suspense>
    }
}

/// The sales as the server lists them: a card each (as the gate's clock read at the
/// render), or "No sales yet.", or why they could not be listed.
#[cfg_attr(not(feature = "ssr"), expect(dead_code, reason = "drawn by the server only: no island holds it"))]
fn sales(start: ShopStart) -> impl IntoView {
    let ShopStart { vouchers, refusal, rendered_ms } = start;
    if let Some(refusal) = &refusal {
        refusal.set_page_status();
    }
    let now = rendered_ms.and_then(chrono::DateTime::from_timestamp_millis);
    let card = |v: &Voucher| CardView::of(v, None, now.unwrap_or_else(chrono::Utc::now), now.is_some());
    let (empty, refused) = (refusal.is_none() && vouchers.is_empty(), refusal.is_some());
    view! {
        <div id=ids::SALES>
            <p role="alert" data-part=ids::REFUSED hidden=!refused>{refusal.map(|e| e.message)}</p>
            <p data-part=ids::EMPTY hidden=!empty>"No sales yet."</p>
            <div class="grid gap-4 sm:grid-cols-2" data-part=ids::GRID hidden=empty || refused>
                {vouchers.iter().map(|v| sale_card(v.id, card(v))).collect_view()}
            </div>
        </div>
    }
}

/// Everything on the shop page that moves, painted into what the server drew
/// (`browser`). It draws nothing itself.
#[island]
fn Shop() -> impl IntoView {
    #[cfg(feature = "hydrate")]
    browser::start();
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;
    use crate::{auth::api::Me, error::ErrorCode, sale::api::ServerTime, voucher::api::ListVouchers, wire::round_trip};

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
