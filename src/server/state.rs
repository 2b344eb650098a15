//! The server's state: the composition root's per-domain handles, each assembled here
//! and handed to the domain that needs it, and nothing a domain reaches up for. Server
//! functions get each handle as a context (`contexts`), axum handlers as a sub-state
//! (`FromRef`); background tasks take the narrow [`Backend`] and what else they need.

use crate::{
    auth::context::Context as Accounts, backend::Backend, bus::Bus, live::context::Context as Live,
    report::context::Context as Report, sale::context::Context as Sale, shutdown::Shutdown,
};
use axum::extract::FromRef;
use leptos::{config::LeptosOptions, prelude::provide_context};
use std::{ops::Deref, sync::Arc};

/// The shared state behind one reference count: routing, middleware and the server
/// function layer clone it several times per request, and a clone of the fields showed
/// in the grab's profile.
#[derive(Clone)]
pub struct AppState(Arc<SharedState>);

impl AppState {
    pub fn new(shared: SharedState) -> Self {
        Self(Arc::new(shared))
    }

    /// The same handles on `backend` (a serving runtime's own connection,
    /// `server::runtimes`).
    pub fn with_backend(&self, backend: Backend) -> Self {
        let b = || backend.clone();
        Self::new(SharedState {
            backend: b(),
            accounts: Arc::new(Accounts { backend: b(), ..(*self.accounts).clone() }),
            sale: Arc::new(Sale { backend: b(), ..(*self.sale).clone() }),
            live: Arc::new(Live { backend: b(), ..(*self.live).clone() }),
            report: Arc::new(Report { backend: b(), ..(*self.report).clone() }),
            ..(**self).clone()
        })
    }

    /// Hands each domain's handle to the server function being run (or the page being
    /// rendered).
    pub fn contexts(&self) {
        provide_context(self.backend.clone());
        provide_context(self.accounts.clone());
        provide_context(self.sale.clone());
        provide_context(self.live.clone());
        provide_context(self.report.clone());
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
    /// The stores: SQL, Redis, the scripts, the key namespace (what vouchers' and
    /// orders' handlers need alone).
    pub backend: Backend,
    /// Accounts, sessions, operators, guessing limits.
    pub accounts: Arc<Accounts>,
    /// The sale's state in this process.
    pub sale: Arc<Sale>,
    /// The live feed.
    pub live: Arc<Live>,
    /// The report.
    pub report: Arc<Report>,
    /// What this process tells itself and every other of what it did.
    pub bus: Arc<Bus>,
    /// Fires when the server is stopping.
    pub shutdown: Shutdown,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}

impl FromRef<AppState> for Backend {
    fn from_ref(state: &AppState) -> Self {
        state.backend.clone()
    }
}

impl FromRef<AppState> for Arc<Accounts> {
    fn from_ref(state: &AppState) -> Self {
        state.accounts.clone()
    }
}

impl FromRef<AppState> for Arc<Sale> {
    fn from_ref(state: &AppState) -> Self {
        state.sale.clone()
    }
}

impl FromRef<AppState> for Arc<Live> {
    fn from_ref(state: &AppState) -> Self {
        state.live.clone()
    }
}

impl FromRef<AppState> for Arc<Report> {
    fn from_ref(state: &AppState) -> Self {
        state.report.clone()
    }
}
