//! Seckill: a flash-sale system.
//!
//! A grab has two halves. The **gate** (`sale::gate`, `lua/grab.lua`) decides it in
//! one atomic Redis step and answers with an order id at once; the **worker**
//! (`worker`) persists granted orders from Redis Streams into SQL in batches.
//!
//! One folder per domain concept (`audit`, `auth`, `voucher`, `orders`, `report`,
//! `sale`, `worker`, `live`) over a foundation that imports no domain, the pages and
//! the shell above them, and `server` assembling them. The map file by file, the rule
//! that dependencies point one way (held by `layering`, a test) and what each word
//! means: `docs/architecture.md#layout`.
//!
//! Server-only code sits behind the `ssr` feature; `hydrate` builds the browser side.

// Leptos views are nested types; the page's deepest (the account menu inside the shop
// page) passes the compiler's default depth of 128.
#![recursion_limit = "256"]

pub(crate) mod app;
pub(crate) mod audit;
pub(crate) mod auth;
pub(crate) mod browser;
pub mod error;
pub(crate) mod listing;
pub(crate) mod live;
pub(crate) mod money;
pub(crate) mod orders;
pub(crate) mod pages;
pub(crate) mod report;
pub(crate) mod rfc3339;
pub(crate) mod sale;
pub(crate) mod voucher;
pub(crate) mod wire;
#[cfg(feature = "ssr")]
pub(crate) mod worker;

#[cfg(feature = "ssr")]
pub(crate) mod backend;
#[cfg(feature = "ssr")]
pub(crate) mod body;
#[cfg(feature = "ssr")]
pub(crate) mod bus;
#[cfg(feature = "ssr")]
pub mod client;
#[cfg(feature = "ssr")]
pub(crate) mod client_ip;
#[cfg(feature = "ssr")]
pub mod config;
#[cfg(feature = "ssr")]
pub(crate) mod order_ids;
#[cfg(feature = "ssr")]
pub mod server;
#[cfg(feature = "ssr")]
pub(crate) mod shutdown;
#[cfg(feature = "ssr")]
pub mod testing;
#[cfg(feature = "ssr")]
pub(crate) mod text;

#[cfg(all(test, feature = "ssr"))]
mod layering;

/// Browser entry point: readies the reactive system; Leptos's island script then
/// hydrates each `#[island]` of the server-rendered page, in document order.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_islands();
}
