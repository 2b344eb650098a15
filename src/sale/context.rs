//! What the sale's handlers share, handed to them by the server (its composition root
//! assembles it): the stores and this process's sale state (order ids, receipts,
//! admission, sold-out flags, rebuilds and refills under way, the gate calls being
//! gathered, the report's count of answers, the bus).

use super::{
    admission::Admission, batches::Batches, rebuilds::Rebuilds, receipt::Receipts, refill::Refills,
    sold_out::SoldOutFlags,
};
use crate::{backend::Backend, bus::Bus, order_ids::OrderIds, report::tally::Tally, shutdown::Shutdown};
use std::sync::Arc;

/// The sale's handles (see the module's doc).
#[derive(Clone)]
pub struct Context {
    /// The stores: SQL, Redis, the scripts, the key namespace.
    pub backend: Backend,
    /// Order id blocks of this process.
    pub ids: Arc<OrderIds>,
    /// Makes and checks grants' receipts (`sale::receipt`).
    pub receipts: Arc<Receipts>,
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
    /// What this process tells itself and every other of what it did (an order
    /// granted, a voucher changed): whoever keeps state it changes hears it there.
    pub bus: Arc<Bus>,
    /// Fires when the server is stopping (grabs are refused then).
    pub shutdown: Shutdown,
}

impl Context {
    /// The handle of the request being served (inside a server function).
    pub fn get() -> Arc<Self> {
        leptos::prelude::expect_context()
    }
}
