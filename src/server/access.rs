//! Who may call what: one entry per route the server answers (server functions, the
//! plain grab routes, the live feed, the CSV exports, `/metrics`, health), read by the
//! front door (`api_guard`), which refuses a caller the entry excludes before the
//! handler runs and hands the handler the caller it found (`Caller`). Pages and site
//! files are for anyone (the admin page shows its own sign-in form).
//!
//! The live feed is one path for two audiences: anyone for the shop's view
//! (`?view=shop`), operators for theirs; its entry says anyone and the feed tells the
//! two apart.

use crate::{
    auth::api as auth, auth::operator_api as operators, error::ErrorCode, live::api as live, orders::api as orders,
    report::api as report, sale::api as sale, sale::launch, sale::run, voucher::api as voucher,
};
use axum::http::Method;
use server_fn::ServerFn;
use std::{collections::HashMap, sync::OnceLock};

/// Who may call a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Anyone,
    /// A signed-in shopper (a session cookie, or the shop's own login).
    Shopper,
    /// An operator of any role, or the admin token.
    Operator,
    /// An operator with the admin role, or the admin token.
    AdminRole,
    /// The admin token only (what a monitoring system's scraper holds).
    AdminToken,
}

impl Access {
    /// Whether only operators (or the admin token) may call the route.
    pub fn is_operators(self) -> bool {
        matches!(self, Self::Operator | Self::AdminRole | Self::AdminToken)
    }
}

/// Every server function's entry, its own refusals (`error::refuses!`, beside its
/// handler), and (for the API's document, `openapi`) how its operation is described
/// from its type: one list for all three.
macro_rules! fns {
    ($($f:ty => $access:ident),* $(,)?) => {
        const SERVER_FNS: &[(&str, Access, &[ErrorCode])] =
            &[$((<$f as ServerFn>::PATH, Access::$access, <$f as crate::error::Refusals>::OWN)),*];
        $(declared!($f, $access);)*

        /// Why a body sent to the server function at `path` did not decode, naming the
        /// field at fault (`body::fault`); `None` for a body that decodes, or a path
        /// that is no server function's. Asked only once a call was refused for its body.
        pub fn body_fault(path: &str, bytes: &[u8]) -> Option<crate::error::AppError> {
            $(if path == <$f as ServerFn>::PATH {
                return crate::body::fault::<$f>(bytes);
            })*
            None
        }

        /// Every server function: its path, who may call it, and its operation.
        pub fn server_fns() -> impl Iterator<Item = (&'static str, Access, super::openapi::operation::Describe)> {
            [$((<$f as ServerFn>::PATH, Access::$access, super::openapi::operation::server_fn::<$f> as super::openapi::operation::Describe)),*].into_iter()
        }
    };
}

/// What a server function's handler may ask for, from its entry: its shopper, its
/// operator, its admin (`auth::caller`'s `ForShoppers`, `ForOperators`, `ForAdmins`).
/// A handler asking for a caller its entry does not declare does not compile.
macro_rules! declared {
    ($f:ty, Anyone) => {};
    ($f:ty, Shopper) => {
        impl crate::auth::caller::ForShoppers for $f {}
    };
    ($f:ty, Operator) => {
        impl crate::auth::caller::ForOperators for $f {}
    };
    ($f:ty, AdminRole) => {
        impl crate::auth::caller::ForOperators for $f {}
        impl crate::auth::caller::ForAdmins for $f {}
    };
}

fns![
    auth::SignUp => Anyone,
    auth::SignUpChallenge => Anyone,
    auth::SignIn => Anyone,
    auth::SignOut => Anyone,
    auth::Me => Anyone,
    operators::AdminSignIn => Anyone,
    operators::OperatorSignIn => Anyone,
    operators::OperatorMe => Anyone,
    operators::AdminStatus => Anyone,
    auth::ChangePassword => Shopper,
    auth::SignOutEverywhere => Shopper,
    operators::ChangeOperatorPassword => Operator,
    operators::AddOperator => AdminRole,
    operators::ListOperators => AdminRole,
    operators::RemoveOperator => AdminRole,
    operators::SetOperatorRole => AdminRole,
    voucher::ListVouchers => Anyone,
    voucher::ShopSettings => Anyone,
    sale::ServerTime => Anyone,
    sale::Grab => Shopper,
    sale::GrabToken => Shopper,
    sale::GrabResult => Shopper,
    orders::MyOrders => Shopper,
    orders::PayOrder => Shopper,
    orders::CancelOrder => Shopper,
    orders::ListOrders => Operator,
    report::SaleReport => Operator,
    live::SaleStats => Operator,
    launch::CreateVoucher => Operator,
    launch::WarmUp => Operator,
    run::ListAudit => Operator,
    run::UpdateVoucher => Operator,
    run::PauseSale => Operator,
    run::ResumeSale => Operator,
    run::EndSale => Operator,
    run::AddStock => Operator,
    run::WithdrawStock => Operator,
];

/// Where the API's document is served (`openapi`, which the table describes: so the
/// table, not the document, holds its path).
pub const DOCUMENT_PATH: &str = "/api/openapi.json";

/// Where the document is served rendered for people (Redoc, from the site's own files).
pub const REFERENCE_PATH: &str = "/api/docs";

/// Every other route's entry and its own refusals (each its module's own constants).
const OTHER_ROUTES: [(&str, Access, &[ErrorCode]); 8] = [
    (crate::live::FEED_PATH, Access::Anyone, crate::live::sse::REFUSES),
    (crate::orders::export::PATH, Access::Operator, crate::orders::export::REFUSES),
    (crate::report::api::CSV_PATH, Access::Operator, crate::report::api::CSV_REFUSES),
    (super::monitoring::METRICS, Access::AdminToken, &[]),
    (super::monitoring::HEALTHZ, Access::Anyone, &[]),
    (super::monitoring::READYZ, Access::Anyone, &[]),
    (DOCUMENT_PATH, Access::Anyone, &[]),
    (REFERENCE_PATH, Access::Anyone, &[]),
];

/// Every entry: `(path, who may call it)`.
pub fn table() -> impl Iterator<Item = (&'static str, Access)> {
    SERVER_FNS.iter().chain(&OTHER_ROUTES).map(|(path, access, _)| (*path, *access))
}

/// What the handler of the route at `path` refuses beyond the front door
/// (`refusals::of` adds the door's); nothing for a path not in the table.
pub fn own_refusals(path: &str) -> &'static [ErrorCode] {
    SERVER_FNS.iter().chain(&OTHER_ROUTES).find(|(p, ..)| *p == path).map_or(&[], |(_, _, own)| own)
}

/// Whether `path` is a server function's (a POST) rather than a plain route (a GET).
pub fn is_server_fn(path: &str) -> bool {
    by_path().get(path).is_some_and(|(method, _)| method == Method::POST)
}

/// The method a route in the table serves: server functions are POSTs, the rest GETs.
pub fn method_of(path: &str) -> Method {
    if SERVER_FNS.iter().any(|(p, ..)| *p == path) {
        Method::POST
    } else {
        Method::GET
    }
}

/// Who may call `path` with `method`: its entry, or `None` (a page, a site file, an
/// `/api/...` path nothing serves, or a method the route does not serve). Every request
/// asks, a grab included: one hash lookup, not a walk of the table.
pub fn of(method: &Method, path: &str) -> Option<Access> {
    let (served, access) = by_path().get(path)?;
    // A HEAD is a GET without the body (the router answers it so).
    let head_of_get = method == Method::HEAD && served == Method::GET;
    (served == method || head_of_get).then_some(*access)
}

/// The method `path` is served with, when the table lists it.
pub fn method_of_listed(path: &str) -> Option<Method> {
    by_path().get(path).map(|(served, _)| served.clone())
}

fn by_path() -> &'static HashMap<&'static str, (Method, Access)> {
    static BY_PATH: OnceLock<HashMap<&'static str, (Method, Access)>> = OnceLock::new();
    BY_PATH.get_or_init(|| table().map(|(p, access)| (p, (method_of(p), access))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_server_function_has_one_entry_and_every_entry_a_route() {
        let registered: Vec<(&str, Method)> = server_fn::axum::server_fn_paths().collect();
        for (path, method) in &registered {
            assert_eq!(table().filter(|(p, _)| p == path).count(), 1, "{path} needs one entry");
            assert_eq!(method_of(path), method, "{path}");
        }
        let registered: Vec<&str> = registered.into_iter().map(|(path, _)| path).collect();
        for (path, _) in table() {
            let plain = OTHER_ROUTES.iter().any(|(p, ..)| *p == path);
            assert!(plain || registered.contains(&path), "{path} has an entry but no route");
        }
    }
}
