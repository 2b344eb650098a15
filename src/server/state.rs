//! The server's state: the composition root's per-domain handles, each assembled here
//! and handed to the domain that needs it, and nothing a domain reaches up for. Server
//! functions get each handle as a context (`contexts`), axum handlers as a sub-state
//! (`FromRef`); background tasks take the narrow [`Backend`] and what else they need.

use super::{hasher, page_cache, shop_login, ServeError};
use crate::{
    auth::{context::Context as Accounts, password::Cost, Secrets},
    backend::{Backend, Replicas},
    bus::{self, Bus},
    config::Config,
    live::{context::Context as Live, hub::Hub, slots::FeedSlots},
    order_ids::OrderIds,
    report::{context::Context as Report, tally::Tally},
    sale::{admission::Admission, context::Context as Sale, receipt::Receipts, sold_out::SoldOutFlags},
    shutdown::Shutdown,
    worker::Wakeups,
};
use axum::extract::FromRef;
use leptos::{config::LeptosOptions, prelude::provide_context};
use std::{ops::Deref, sync::Arc, time::Duration};

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

/// Every domain's handle, assembled from the settings, the stores and what was read
/// from them at start (`secrets`, with the password-hash cost unknown names answer at),
/// with the bus that tells each of them what the others did; and the bus's other
/// subscribers, which the server hands on (the shop page's dating, the worker's
/// wake-ups).
pub(super) fn assemble(
    config: &Config,
    (backend, secrets, decoy_cost): (Backend, Secrets, Cost),
    leptos_options: LeptosOptions,
    shutdown: Shutdown,
) -> Result<(AppState, Arc<page_cache::Changes>, Arc<Wakeups>), ServeError> {
    // Whoever keeps state a sale event changes hears it on the bus.
    let sold_out = Arc::new(SoldOutFlags::new(Duration::from_millis(config.sold_out_ttl_ms)));
    let hub = Arc::new(Hub::default());
    let page_changes = Arc::new(page_cache::Changes::default());
    let wakeups = Arc::new(Wakeups::default());
    let subscribers: Vec<Arc<dyn bus::Subscriber>> =
        vec![sold_out.clone(), page_changes.clone(), hub.clone(), wakeups.clone()];
    let bus = Arc::new(bus::Bus::new(subscribers));
    let tally = Arc::<Tally>::default();
    let accounts = Accounts {
        backend: backend.clone(),
        sign_ups: Arc::new(crate::auth::challenge::SignUps::new(config, secrets.derived_key("sign-up challenges"))),
        hasher: Arc::new(hasher(config)?.with_decoy_at(decoy_cost).map_err(ServeError::Config)?),
        shop_login: shop_login(config)?.map(Arc::new),
        secrets: Arc::new(secrets),
    };
    let sale = Sale {
        backend: backend.clone(),
        ids: Arc::new(OrderIds::new(&config.redis_namespace, config.id_block).waiting_for(Replicas {
            wait_ms: backend.replicas.wait_ms.min(crate::order_ids::MOST_BLOCK_WAIT_MS),
            ..backend.replicas
        })),
        receipts: Arc::new(Receipts::new(accounts.secrets.derived_key("grab receipts"))),
        admission: Arc::new(Admission::new(config.grabs_in_flight(), Duration::from_millis(config.shed_latency_ms))),
        sold_out: sold_out.clone(),
        rebuilds: Arc::default(),
        refills: Arc::default(),
        batches: Arc::default(),
        tally: tally.clone(),
        bus: bus.clone(),
        shutdown: shutdown.clone(),
    };
    let live = Live {
        backend: backend.clone(),
        hub,
        feeds: Arc::new(FeedSlots::new(config.max_feeds, config.max_feeds_per_address)),
        feed_lifetime: Duration::from_millis(config.feed_lifetime_ms),
        sold_out,
        shutdown: shutdown.clone(),
    };
    let state = AppState::new(SharedState {
        leptos_options,
        backend: backend.clone(),
        accounts: Arc::new(accounts),
        sale: Arc::new(sale),
        live: Arc::new(live),
        report: Arc::new(Report { backend: backend.clone(), tally }),
        bus,
        shutdown: shutdown.clone(),
    });
    Ok((state, page_changes, wakeups))
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}

/// Each domain's handle, written once: handed to server functions as a context
/// ([`AppState::contexts`]) and to axum handlers as a sub-state (`FromRef`).
macro_rules! handles {
    ($($field:ident: $handle:ty),* $(,)?) => {
        impl AppState {
            /// Hands each domain's handle to the server function being run (or the
            /// page being rendered).
            pub fn contexts(&self) {
                $(provide_context(self.$field.clone());)*
            }
        }

        $(impl FromRef<AppState> for $handle {
            fn from_ref(state: &AppState) -> Self {
                state.$field.clone()
            }
        })*
    };
}

handles!(backend: Backend, accounts: Arc<Accounts>, sale: Arc<Sale>, live: Arc<Live>, report: Arc<Report>);
