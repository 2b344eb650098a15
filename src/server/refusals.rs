//! Which refusals each route can answer: the front door's ([`door`]: they follow from
//! how the route is called and by whom) and its handler's own, declared next to the
//! handler (`error::refuses!` for a server function, a `REFUSES` constant for a plain route)
//! and gathered by the access table. The API's document lists exactly these per
//! operation (`openapi`), so a shop's generated client gets each call's own errors.
//!
//! Both directions are checked. A debug build checks every refusal it answers against
//! its route's list ([`checked`]) and panics on one the list lacks, failing the test
//! that got it; with `SECKILL_REFUSALS_SEEN` set to a folder it also writes down each
//! route and code it answered, and after the test suites the ignored test
//! `every_listed_refusal_was_answered` fails for a listed code no test got. The
//! fuzzer, against a release build, checks each answer's code against the document.

use super::access::{self, Access};
pub use crate::error::Refusals;
use crate::error::{AppError, ErrorCode};
use axum::{
    body::{to_bytes, Body},
    http::{header, Method},
    response::Response,
};
use std::{collections::HashMap, sync::OnceLock};
use strum::VariantArray;

/// What the front door may answer on the route at `path`, whatever its handler does:
/// a method the route does not serve, a rate or guessing limit, a full or stopping
/// server (or a request past its timeout), a bug; a caller its entry does not admit;
/// under `/api/`, a body past the cap; for a call (a POST), a body that is not a JSON
/// object, a call from another site, and (a call for shoppers or operators, whose
/// keys are kept) the `Idempotency-Key` rules.
pub fn door(path: &str, access: Access) -> Vec<ErrorCode> {
    use ErrorCode::*;
    let mut codes = vec![MethodNotAllowed, RateLimited, Unavailable, Internal];
    match access {
        Access::Anyone => {}
        Access::Shopper => codes.push(NotSignedIn),
        Access::Operator | Access::AdminRole | Access::AdminToken => codes.push(OperatorRequired),
    }
    if path.starts_with("/api/") {
        codes.push(InvalidInput);
    }
    if access::method_of(path) == Method::POST {
        codes.extend([UnsupportedMediaType, CrossSite]);
        if access != Access::Anyone {
            codes.extend([IdempotencyKeyReused, IdempotencyInProgress]);
        }
    }
    codes
}

/// Every refusal the route at `path` may answer, in the codes' own order; `None` for
/// a path the access table does not list.
pub fn of(path: &str) -> Option<&'static [ErrorCode]> {
    static BY_PATH: OnceLock<HashMap<&'static str, Vec<ErrorCode>>> = OnceLock::new();
    let by_path = BY_PATH.get_or_init(|| {
        let listed = |path: &'static str, access: Access| {
            let mut codes = door(path, access);
            codes.extend_from_slice(access::own_refusals(path));
            let codes = ErrorCode::VARIANTS.iter().copied().filter(|c| codes.contains(c)).collect();
            (path, codes)
        };
        access::table().map(|(path, access)| listed(path, access)).collect()
    });
    by_path.get(path).map(Vec::as_slice)
}

/// Codes no test is asked to provoke on every route: a bug (`internal`) has no recipe.
pub const UNPROVOKED: &[ErrorCode] = &[ErrorCode::Internal];

/// Where a debug build writes down what it refused (a folder; one file per process).
pub const SEEN_VAR: &str = "SECKILL_REFUSALS_SEEN";

/// `response`, once checked against the refusals `path` lists (see the module's doc).
/// Only debug builds call it: it reads every refusal's body.
pub async fn checked(path: &str, response: Response) -> Response {
    let Some(listed) = of(path) else { return response };
    let json =
        response.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(response.status().is_client_error() || response.status().is_server_error()) || !json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = to_bytes(body, 64 * 1024).await.unwrap_or_default();
    if let Ok(refused) = serde_json::from_slice::<AppError>(&bytes) {
        assert!(
            listed.contains(&refused.code),
            "{path} answered `{}`, which its operation does not list (server::refusals)",
            refused.code.as_str()
        );
        seen::write(path, refused.code);
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// What a debug build answered, written down when [`SEEN_VAR`] names a folder.
mod seen {
    use super::*;
    use std::{collections::HashSet, io::Write, sync::Mutex};

    struct Seen {
        file: std::fs::File,
        written: HashSet<(String, ErrorCode)>,
    }

    /// Writes `path code` once per pair and process.
    pub fn write(path: &str, code: ErrorCode) {
        static SEEN: OnceLock<Option<Mutex<Seen>>> = OnceLock::new();
        let seen = SEEN.get_or_init(|| {
            let folder = std::env::var_os(SEEN_VAR)?;
            std::fs::create_dir_all(&folder).ok()?;
            let name = std::path::Path::new(&folder).join(format!("{}.txt", std::process::id()));
            let file = std::fs::OpenOptions::new().create(true).append(true).open(name).ok()?;
            Some(Mutex::new(Seen { file, written: HashSet::new() }))
        });
        let Some(seen) = seen else { return };
        let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.written.insert((path.to_owned(), code)) {
            let _ = writeln!(seen.file, "{path} {}", code.as_str());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route lists the refusals its caller check gives, and only calls list the
    /// body's.
    #[test]
    fn each_route_lists_its_doors_refusals() {
        for (path, access) in access::table() {
            let listed = of(path).unwrap();
            assert_eq!(listed.contains(&ErrorCode::NotSignedIn), access == Access::Shopper, "{path}");
            assert_eq!(listed.contains(&ErrorCode::UnsupportedMediaType), access::is_server_fn(path), "{path}");
            assert!(!listed.contains(&ErrorCode::NotFound) && !listed.contains(&ErrorCode::Network), "{path}");
        }
        assert!(of("/api/no_such_call").is_none());
    }

    /// Every code a route lists was answered on it by some test (debug builds write
    /// down what they answer: the module's doc). Run after the test suites, with the
    /// folder they wrote to: `.ci/test` does.
    #[test]
    #[ignore = "reads what the test suites answered: run by .ci/test after them"]
    fn every_listed_refusal_was_answered() {
        let folder = std::env::var_os(SEEN_VAR).expect("SECKILL_REFUSALS_SEEN names the folder the suites wrote to");
        let mut answered = std::collections::HashSet::new();
        for file in std::fs::read_dir(folder).expect("the folder the suites wrote to") {
            let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
            answered.extend(text.lines().map(str::to_owned));
        }
        let mut missing = Vec::new();
        for (path, _) in access::table() {
            for code in of(path).unwrap().iter().filter(|c| !UNPROVOKED.contains(c)) {
                let pair = format!("{path} {}", code.as_str());
                if !answered.contains(&pair) {
                    missing.push(pair);
                }
            }
        }
        assert!(missing.is_empty(), "listed, but no test got them:\n{}", missing.join("\n"));
    }
}
