//! Orders: persisted from the voucher streams into SQL by the worker.

#[cfg(feature = "ssr")]
pub mod store;
#[cfg(feature = "ssr")]
pub mod worker;
