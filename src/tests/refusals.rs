//! The front door's refusals on every route (`server::refusals::door`): each route of
//! the access table is called every way the door refuses, and answers the code its
//! operation lists. With the suites' own drills, which give the handlers' refusals,
//! every listed code is answered by some test (`every_listed_refusal_was_answered`,
//! after the suites).

use crate::support::{code, hold_a_slot, Options, TestApp, ADMIN_TOKEN};
use reqwest::{Method, RequestBuilder};
use seckill::server::access::{self, Access};
use serde_json::Value;

/// A request of `path` with `method`, a JSON object for a body where it takes one.
fn request(app: &TestApp, method: Method, path: &str) -> RequestBuilder {
    let req = app.http.request(method.clone(), format!("{}{path}", app.base));
    if method == Method::POST {
        req.header("content-type", "application/json").body("{}")
    } else {
        req
    }
}

/// The answer's status and code.
async fn refused(req: RequestBuilder) -> (u16, String) {
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap_or(Value::Null);
    (status, code(&body).to_owned())
}

/// `path`'s own method, and the other one.
fn methods(path: &str) -> (Method, Method) {
    let own = access::method_of(path);
    let other = if own == Method::POST { Method::GET } else { Method::POST };
    (own, other)
}

/// Every route refuses a method it does not serve, a caller its entry does not admit,
/// and (a call) a body that is not JSON, or not an object, and a call from another
/// site; a call with a caller whose keys are kept refuses a key sent with another
/// body, and one whose first call is still being served. The feed and the CSVs refuse
/// a query they cannot read.
#[tokio::test]
async fn every_route_gives_the_doors_refusals() {
    let app = TestApp::spawn().await;
    let shopper = app.sign_in("door-shopper").await;
    let mut redis = app.redis.clone();
    for (path, access) in access::table() {
        let (own, other) = methods(path);
        assert_eq!(refused(request(&app, other, path)).await, (405, "method_not_allowed".into()), "{path}");
        let anonymous = request(&app, own.clone(), path);
        match access {
            Access::Anyone => {}
            Access::Shopper => assert_eq!(refused(anonymous).await, (401, "not_signed_in".into()), "{path}"),
            _ => assert_eq!(refused(anonymous).await, (401, "admin_required".into()), "{path}"),
        }
        if own != Method::POST {
            // A body past the cap, where the API reads one (the feed reads none).
            if path.starts_with("/api/") && path != seckill_feed() {
                let huge = app.http.get(format!("{}{path}", app.base)).body(vec![b' '; 65 * 1024]);
                assert_eq!(refused(huge).await, (400, "invalid_input".into()), "{path}");
            }
            continue;
        }
        let call = || app.http.post(format!("{}{path}", app.base));
        let text = call().header("content-type", "text/plain").body("{}");
        assert_eq!(refused(text).await, (415, "unsupported_media_type".into()), "{path}");
        let cross = request(&app, Method::POST, path).header("sec-fetch-site", "cross-site");
        assert_eq!(refused(cross).await, (403, "cross_site".into()), "{path}");
        let (scope, credential) = match access {
            Access::Anyone => (String::new(), ("x-none", String::new())),
            Access::Shopper => (format!("shopper:{}", shopper.user_id), ("cookie", shopper.cookie.clone())),
            _ => ("token".to_owned(), ("authorization", format!("Bearer {ADMIN_TOKEN}"))),
        };
        let list = call().header("content-type", "application/json").header(credential.0, &credential.1).body("[]");
        assert_eq!(refused(list).await, (400, "invalid_input".into()), "{path}");
        if access == Access::Anyone {
            continue;
        }
        // A first call with the key, under way on another process: its mark, as it
        // leaves it. The same body is told to retry; another, that the key is taken.
        let (at, mark) = seckill::testing::pending_mark(&app.namespace, &scope, path, path, b"{}");
        let _: () = redis::AsyncCommands::set(&mut redis, &at, mark).await.unwrap();
        let keyed = |body: &'static str| {
            let req = call().header("content-type", "application/json").header(credential.0, &credential.1);
            req.header("idempotency-key", path).body(body)
        };
        assert_eq!(refused(keyed("{}")).await, (409, "idempotency_in_progress".into()), "{path}");
        assert_eq!(refused(keyed("{ }")).await, (422, "idempotency_key_reused".into()), "{path}");
    }
    for (query, status, expected) in [("?view=everything", 400, "invalid_input"), ("", 401, "admin_required")] {
        let feed = app.http.get(format!("{}{}{query}", app.base, seckill_feed()));
        assert_eq!(refused(feed).await, (status, expected.into()), "the feed{query}");
    }
    for csv in csv_paths() {
        let export = |query: &str| app.http.get(format!("{}{csv}{query}", app.base)).bearer_auth(ADMIN_TOKEN);
        assert_eq!(refused(export("?voucher_id=x")).await, (400, "invalid_input".into()), "{csv}");
        assert_eq!(refused(export("?voucher_id=987654")).await, (404, "unknown_voucher".into()), "{csv}");
    }
    app.stop().await;
}

/// Every route, once its caller's address is held back for guessing at the admin token
/// (a bearer that does not verify), answers `rate_limited` to a bearer that does not.
#[tokio::test]
async fn every_route_holds_back_a_guesser() {
    let app = TestApp::spawn().await;
    let guess = |path: &str| request(&app, access::method_of(path), path).bearer_auth("not-the-admin-token");
    let mut held = false;
    for _ in 0..=seckill::testing::GUESSES_PER_ADDRESS {
        held = refused(guess("/healthz")).await == (429, "rate_limited".into());
        if held {
            break;
        }
    }
    assert!(held, "the guesser's address is held back");
    for (path, _) in access::table() {
        assert_eq!(refused(guess(path)).await, (429, "rate_limited".into()), "{path}");
    }
    app.stop().await;
}

/// Every route answers `unavailable` while the server serves all it may at once; the
/// shop's feed, which takes no request slot, when its caller's address has all the
/// feeds it may.
#[tokio::test]
async fn every_route_sheds_over_the_cap() {
    let app = TestApp::with(Options::default().with(|c| {
        c.max_requests = 1;
        c.max_feeds_per_address = 1;
    }))
    .await;
    let _feed = crate::support::Feed::open(&app, true).await;
    let holder = hold_a_slot(&app).await;
    for (path, _) in access::table() {
        let req = request(&app, access::method_of(path), path);
        let req = if path == seckill_feed() { app.http.get(format!("{}{path}?view=shop", app.base)) } else { req };
        assert_eq!(refused(req).await, (503, "unavailable".into()), "{path}");
    }
    drop(holder);
    app.stop().await;
}

fn seckill_feed() -> &'static str {
    seckill::testing::FEED_PATH
}

fn csv_paths() -> [&'static str; 2] {
    seckill::testing::CSV_PATHS
}
