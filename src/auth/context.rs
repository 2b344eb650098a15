//! What the accounts' handlers share, handed to them by the server (its composition
//! root assembles it): the stores, the session key and what follows it, the password
//! hasher, the shop's own login and the sign-up rules.

use super::{challenge::SignUps, jwt::ShopLogin, password::Hasher, Secrets};
use crate::backend::Backend;
use std::sync::Arc;

/// The accounts' handles (see the module's doc).
#[derive(Clone)]
pub struct Context {
    /// The stores: SQL, Redis, the scripts, the key namespace.
    pub backend: Backend,
    /// Session key, ended sessions, operators and the admin token.
    pub secrets: Arc<Secrets>,
    /// Hashes and checks passwords on a bounded pool of its own.
    pub hasher: Arc<Hasher>,
    /// The shop's own login, when configured (`SECKILL_JWT_*`).
    pub shop_login: Option<Arc<ShopLogin>>,
    /// Whether and at what cost shoppers make accounts (`auth::challenge`).
    pub sign_ups: Arc<SignUps>,
}

impl Context {
    /// The handle of the request being served (inside a server function).
    pub fn get() -> Arc<Self> {
        leptos::prelude::expect_context()
    }
}
