//! The state every request handler and server function shares.

use crate::{
    auth::Secrets,
    ids::OrderIds,
    live::hub::Hub,
    sale::{gate::Scripts, sold_out::SoldOutFlags},
};
use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use redis::aio::ConnectionManager;
use sqlx::SqlitePool;
use std::sync::Arc;

/// Cheap to clone: every field is a handle.
#[derive(Clone)]
pub struct AppState {
    /// Site settings for rendering (paths of the WASM bundle and CSS).
    pub leptos_options: LeptosOptions,
    /// The durable record: users, vouchers, orders.
    pub db: SqlitePool,
    /// One multiplexed, self-reconnecting connection shared by all requests.
    pub redis: ConnectionManager,
    /// The Lua scripts, loaded once and run by SHA.
    pub scripts: Arc<Scripts>,
    /// Order id blocks of this process.
    pub ids: Arc<OrderIds>,
    /// Session key and admin token.
    pub secrets: Arc<Secrets>,
    /// Prefix of every Redis key and channel.
    pub namespace: Arc<str>,
    /// This process's sold-out flags (a cache fed by the sold-out broadcast).
    pub sold_out: Arc<SoldOutFlags>,
    /// Fans live numbers and events out to open dashboards.
    pub hub: Arc<Hub>,
    /// Turns true when the server is stopping (long-lived feeds end then).
    pub stopping: tokio::sync::watch::Receiver<bool>,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}
