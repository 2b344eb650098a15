//! The state every request handler and server function shares. Background tasks do
//! not take it: they take the narrow [`Backend`] and what else they need.

use crate::{
    auth::{jwt::ShopLogin, password::Hasher, Secrets},
    backend::Backend,
    bus::Bus,
    live::{hub::Hub, slots::FeedSlots},
    order_ids::OrderIds,
    report::tally::Tally,
    sale::{
        admission::Admission, batches::Batches, rebuilds::Rebuilds, receipt::Receipts, shards::Refills,
        sold_out::SoldOutFlags,
    },
    shutdown::Shutdown,
};
use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use std::{ops::Deref, sync::Arc};

/// The shared state behind one reference count: routing, middleware and the server
/// function layer clone it several times per request, and a clone of the fields (a
/// dozen handles and the site settings' strings) showed in the grab's profile.
#[derive(Clone)]
pub struct AppState(Arc<SharedState>);

impl AppState {
    pub fn new(shared: SharedState) -> Self {
        Self(Arc::new(shared))
    }
}

impl Deref for AppState {
    type Target = SharedState;

    fn deref(&self) -> &SharedState {
        &self.0
    }
}

/// What [`AppState`] holds.
#[derive(Clone)]
pub struct SharedState {
    /// Site settings for rendering (paths of the WASM bundle and CSS).
    pub leptos_options: LeptosOptions,
    /// The stores: SQL, Redis, the scripts, the key namespace.
    pub backend: Backend,
    /// Order id blocks of this process.
    pub ids: Arc<OrderIds>,
    /// Session key, ended sessions and admin token.
    pub secrets: Arc<Secrets>,
    /// Makes and checks grants' receipts (`sale::receipt`).
    pub receipts: Arc<Receipts>,
    /// Hashes and checks passwords on a bounded pool of its own.
    pub hasher: Arc<Hasher>,
    /// The shop's own login, when configured (`SECKILL_JWT_*`).
    pub shop_login: Option<Arc<ShopLogin>>,
    /// Whether and at what cost shoppers make accounts (`auth::challenge`).
    pub sign_ups: Arc<crate::auth::challenge::SignUps>,
    /// Sheds grabs past what this process can serve (`sale::admission`).
    pub admission: Arc<Admission>,
    /// This process's sold-out flags (a cache fed by the sold-out broadcast).
    pub sold_out: Arc<SoldOutFlags>,
    /// Vouchers Redis lost that a grab of this process is rebuilding.
    pub rebuilds: Arc<Rebuilds>,
    /// Dry buckets of sales of several shards that a grab of this process is refilling.
    pub refills: Arc<Refills>,
    /// Grabs of each sale waiting for, or riding in, this process's gate calls.
    pub batches: Arc<Batches>,
    /// This process's count of the grabs' answers, for the sale's report.
    pub tally: Arc<Tally>,
    /// Fans live numbers and events out to open dashboards.
    pub hub: Arc<Hub>,
    /// Caps on open live feeds.
    pub feeds: Arc<FeedSlots>,
    /// What this process tells itself and every other of what it did (an order
    /// granted, a voucher changed): whoever keeps state it changes hears it there.
    pub bus: Arc<Bus>,
    /// Fires when the server is stopping (long-lived feeds end then).
    pub shutdown: Shutdown,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}
