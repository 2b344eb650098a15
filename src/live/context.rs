//! What the live feed's handlers share, handed to them by the server (its composition
//! root assembles it): the stores, the hub that fans figures out, the caps on open
//! feeds, the sold-out flags the figures show, and the stop signal feeds end on.

use super::{hub::Hub, slots::FeedSlots};
use crate::{backend::Backend, sale::sold_out::SoldOutFlags, shutdown::Shutdown};
use std::{sync::Arc, time::Duration};

/// The live feed's handles (see the module's doc).
#[derive(Clone)]
pub struct Context {
    /// The stores: SQL, Redis, the scripts, the key namespace.
    pub backend: Backend,
    /// Fans live numbers and events out to open dashboards.
    pub hub: Arc<Hub>,
    /// Caps on open live feeds.
    pub feeds: Arc<FeedSlots>,
    /// Longest a feed stays open (`SECKILL_FEED_LIFETIME_MS`).
    pub feed_lifetime: Duration,
    /// This process's sold-out flags, shown with a sale's figures.
    pub sold_out: Arc<SoldOutFlags>,
    /// Fires when the server is stopping (open feeds end then).
    pub shutdown: Shutdown,
}

impl Context {
    /// The handle of the request being served (inside a server function).
    pub fn get() -> Arc<Self> {
        leptos::prelude::expect_context()
    }
}
