//! Grab before the shop's WASM arrives. On a phone on a slow link the island's code
//! takes a second or more to arrive; a shopper who loads the shop as a sale opens would
//! wait that long for a Grab that works, and lose their place in the line. So the page
//! carries a small script ([`SCRIPT`], inline: 3.7 KB, 1.5 compressed) that sends a Grab press
//! at once through the JSON API (`/api/grab`, with the fair start's token first where
//! the sale has one: the same calls and the same rules as the island's) and enables a
//! button at its sale's opening instant by the gate's clock the page was rendered with.
//! It counts from when the page's first byte came (the navigation's `responseStart`:
//! the script itself runs only once the stylesheet is in, on a slow link a round trip
//! later), and from the gate's time when the page left the server (a shared render is
//! up to two lifetimes old, and says its age: `Server-Timing: age`,
//! `server::page_cache`). Both only move "now" closer to the gate's, never past it.
//!
//! The island takes over as it hydrates ([`take_over`]): from then on the script does
//! nothing, and each card shows what its early press got ([`answer`]), following the
//! order as if the island had sent it.

#[cfg(feature = "hydrate")]
use {super::GrabTicket, crate::error::AppResult};

/// The script, inline in the shop page before its cards; it reads the gate's time at
/// render from its own `data-gate`.
#[cfg_attr(not(feature = "ssr"), expect(dead_code, reason = "only the server's render carries it"))]
pub const SCRIPT: &str = include_str!("early_grab.js");

/// The id of the line where the script says a press and its answer until the island
/// shows them on the card (outside the island: the server renders it, no island
/// hydrates it). On a phone whose WASM is slow, or never comes, the shopper still
/// reads their order id, or why the grab was refused, as soon as the answer is in.
pub const STATUS_ID: &str = "early-status";

/// Names the script and the island share on `window`.
#[cfg(feature = "hydrate")]
mod names {
    /// Set by the island: the script stands down.
    pub const LIVE: &str = "seckillLive";
    /// The answers to early presses, by voucher id.
    pub const EARLY: &str = "seckillEarly";
    /// The monotonic clock's reading when the page arrived.
    pub const SINCE: &str = "seckillSince";
    /// The gate's time when the page left the server (its render's, plus its age).
    pub const GATE: &str = "seckillGate";
}

#[cfg(feature = "hydrate")]
fn window_get(name: &str) -> Option<wasm_bindgen::JsValue> {
    let window = web_sys::window()?;
    js_sys::Reflect::get(&window, &name.into()).ok().filter(|v| !v.is_undefined() && !v.is_null())
}

/// Tells the script the island is live (call before any card listens): its clicks are
/// the island's now.
#[cfg(feature = "hydrate")]
pub fn take_over() {
    if let Some(window) = web_sys::window() {
        let _ = js_sys::Reflect::set(&window, &names::LIVE.into(), &true.into());
        // The cards say it from here on.
        if let Some(status) = window.document().and_then(|d| d.get_element_by_id(STATUS_ID)) {
            status.set_text_content(None);
        }
    }
}

/// The monotonic clock's reading (`browser::monotonic_ms`) when the page arrived, as
/// the script took it: the gate's time at render was no later than that instant.
#[cfg(feature = "hydrate")]
pub fn arrived_at() -> Option<f64> {
    window_get(names::SINCE).and_then(|v| v.as_f64())
}

/// The gate's time when the page left the server, as the script worked it out (the
/// render's time plus the shared render's age): no later than [`arrived_at`] either.
#[cfg(feature = "hydrate")]
pub fn gate_when_sent() -> Option<i64> {
    window_get(names::GATE).and_then(|v| v.as_f64()).filter(|ms| ms.is_finite()).map(|ms| ms as i64)
}

/// Whether the script pressed Grab for `voucher_id` (and disabled its button): the
/// island then takes the button as pressed, as the page shows it.
#[cfg(feature = "hydrate")]
pub fn pressed(voucher_id: i64) -> bool {
    window_get(names::EARLY)
        .and_then(|early| js_sys::Reflect::get(&early, &voucher_id.to_string().into()).ok())
        .is_some_and(|answer| !answer.is_undefined())
}

/// An early press's answer for `voucher_id`, once: `None` when there was no early
/// press; `Some(None)` when it could not be sent or read (the island presses again);
/// else what the API answered.
#[cfg(feature = "hydrate")]
pub async fn answer(voucher_id: i64) -> Option<Option<AppResult<GrabTicket>>> {
    use wasm_bindgen::JsCast;
    let early = window_get(names::EARLY)?;
    let key = wasm_bindgen::JsValue::from(voucher_id.to_string());
    let promise = js_sys::Reflect::get(&early, &key).ok()?.dyn_into::<js_sys::Promise>().ok()?;
    let _ = js_sys::Reflect::delete_property::<wasm_bindgen::JsValue>(early.unchecked_ref(), &key);
    let reply = js_sys::futures::JsFuture::from(promise).await.ok().filter(|v| !v.is_null());
    Some(reply.and_then(|reply| decode(&reply)))
}

/// `{ ok, body }` as the script keeps it: the ticket, or the API's error.
#[cfg(feature = "hydrate")]
fn decode(reply: &wasm_bindgen::JsValue) -> Option<AppResult<GrabTicket>> {
    let field = |name: &str| js_sys::Reflect::get(reply, &name.into()).ok();
    let body = field("body")?.as_string()?;
    if field("ok")?.as_bool()? {
        crate::wire::parse(&body).map(Ok)
    } else {
        crate::wire::parse(&body).map(Err)
    }
}
