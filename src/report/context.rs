//! What the report's handlers share, handed to them by the server (its composition
//! root assembles it): the stores and this process's count of the grabs' answers
//! (added to the report's tables before one is read).

use super::tally::Tally;
use crate::backend::Backend;
use std::sync::Arc;

/// The report's handles (see the module's doc).
#[derive(Clone)]
pub struct Context {
    /// The stores: SQL, Redis, the scripts, the key namespace.
    pub backend: Backend,
    /// This process's count of the grabs' answers.
    pub tally: Arc<Tally>,
}

impl Context {
    /// The handle of the request being served (inside a server function).
    pub fn get() -> Arc<Self> {
        leptos::prelude::expect_context()
    }
}
