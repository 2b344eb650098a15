//! Seckill: a flash-sale system.
//!
//! A grab has two halves. The **gate** (`sale::gate`, `lua/grab.lua`) decides it in
//! one atomic Redis step and answers with an order id at once; the **worker**
//! (`worker`) persists granted orders from Redis Streams into SQL in batches.
//!
//! Layout, one folder per domain concept, each importing only those before it:
//! - `audit`: the operator's log (who did what to a sale, before and after, when).
//! - `auth`: accounts and passwords, signed session cookies that can be ended,
//!   guessing limits, operators, the admin token, the shop's own login.
//! - `voucher`: vouchers, validation, SQL, units left, the voucher list.
//! - `orders`: orders SQL, their stream entry, their lifecycle, the grab-result
//!   format, give-backs.
//! - `report`: the sale's report (grabs per second by answer, gate latency, orders,
//!   units, operator actions) and each process's count of the answers it gave.
//! - `sale`: warm-up, the gate, `grab` / `grab_result`, putting a voucher on sale
//!   and running it, the shopper's sale card.
//! - `worker`: the stream worker.
//! - `live`: a sale's figures (`sale_stats`), the sampler and the live dashboard feed.
//! - `server` (server only): start-up and wiring, the database, router, who may call
//!   what, the API's document, a private redis-server for dev runs.
//!
//! Below them the foundation (`error`, `body`, `browser`, `client_ip`, `backend`,
//! `bus`, `shutdown`, `config`, `order_ids`, `money`, `rfc3339`) imports no domain;
//! `layering` (a test) holds the rule. What each word means: `docs/architecture.md`.
//! Of the foundation, `rfc3339` is how the browser reads the API's times (it keeps
//! chrono's general parser out of the WASM).
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
pub(crate) mod live;
pub(crate) mod money;
pub(crate) mod orders;
pub(crate) mod pages;
pub(crate) mod report;
pub(crate) mod rfc3339;
pub(crate) mod sale;
pub(crate) mod voucher;
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
pub(crate) mod state;
#[cfg(feature = "ssr")]
pub mod testing;

#[cfg(all(test, feature = "ssr"))]
mod layering;

/// Browser entry point: hydrates the server-rendered page.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_lazy(app::App);
}
