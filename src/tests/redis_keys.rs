//! The Redis key table (`src/backend/layout.rs`) is the truth about every key: a sale
//! day leaves no key the table does not name, and each key's time to live is the one
//! its row's `expires` column says (issue 54).

use crate::support::{code, Options, Shopper, TestApp, PASSWORD};
use redis::AsyncCommands;
use seckill::testing::{
    Challenge, ATTEMPTS_KEPT, ORDER_IDS_KEPT, REBUILD_DEADLINE, SIGN_INS_KEPT, SIGN_UPS_FROM_ADDRESS_KEPT,
    SIGN_UPS_IN_MINUTE_KEPT, SIGN_UP_CHALLENGE_KEPT, WORKER_LEASE,
};
use serde_json::{json, Value};
use std::time::Duration;

/// One row of the key table: the key's pattern and its `expires` cell.
struct Row {
    pattern: String,
    expires: String,
}

/// The key table's rows, read from the module doc that holds them.
fn table() -> Vec<Row> {
    let source = include_str!("../backend/layout.rs");
    let rows = source.lines().filter_map(|l| l.strip_prefix("//! | `<ns>"));
    rows.map(|row| {
        let cells: Vec<&str> = row.split(" | ").collect();
        let pattern = format!("<ns>{}", cells[0].trim_end_matches('`'));
        Row { pattern, expires: cells.last().unwrap().trim_end_matches(" |").trim().to_owned() }
    })
    .collect()
}

/// Whether `key` fits `pattern`, each `<placeholder>` standing for one or more
/// characters: digits for a time (`<minute>`, `<hour>`, `<yyyymmdd>`), digits and dots
/// for a voucher's `<id>` (a bucket's tag adds its place), any but braces otherwise.
fn fits(pattern: &str, key: &str) -> bool {
    let Some(at) = pattern.find('<') else { return pattern == key };
    let Some(value) = key.strip_prefix(&pattern[..at]) else { return false };
    let end = at + pattern[at..].find('>').expect("a placeholder ends");
    let allowed = |c: char| match &pattern[at + 1..end] {
        "minute" | "hour" | "yyyymmdd" => c.is_ascii_digit(),
        "id" => c.is_ascii_digit() || c == '.',
        _ => c != '{' && c != '}',
    };
    let taken = value.char_indices().take_while(|&(_, c)| allowed(c)).map(|(i, c)| i + c.len_utf8());
    taken.into_iter().any(|n| fits(&pattern[end + 1..], &value[n..]))
}

/// The longest time to live a cell names by its constant.
fn kept(expires: &str) -> Option<Duration> {
    let named = expires.split("[`").nth(1)?.split('`').next()?;
    Some(match named {
        "ATTEMPTS_KEPT" => ATTEMPTS_KEPT,
        "SIGN_UPS_FROM_ADDRESS_KEPT" => SIGN_UPS_FROM_ADDRESS_KEPT,
        "SIGN_INS_KEPT" => SIGN_INS_KEPT,
        "SIGN_UPS_IN_MINUTE_KEPT" => SIGN_UPS_IN_MINUTE_KEPT,
        "SIGN_UP_CHALLENGE_KEPT" => SIGN_UP_CHALLENGE_KEPT,
        "ORDER_IDS_KEPT" => ORDER_IDS_KEPT,
        "WORKER_LEASE" => WORKER_LEASE,
        "REBUILD_DEADLINE" => REBUILD_DEADLINE,
        other => panic!("the key table names {other}, which this test does not know"),
    })
}

/// A shopper signed up with a solved challenge, and the cookies the answer set.
async fn sign_up(app: &TestApp, name: &str) -> (Shopper, String) {
    let (_, asked) = app.call("sign_up_challenge", json!({}), &[]).await;
    let challenge: Challenge = serde_json::from_value(asked["challenge"].clone()).unwrap();
    let body = json!({ "name": name, "password": PASSWORD, "challenge": challenge.solve().unwrap() });
    let res = app.http.post(format!("{}/api/sign_up", app.base)).json(&body).send().await.unwrap();
    let cookies: Vec<String> = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|c| Some(c.to_str().ok()?.split(';').next()?.to_owned()))
        .collect();
    let body: Value = res.json().await.unwrap();
    let shopper = Shopper { cookie: cookies[0].clone(), user_id: body["user_id"].as_i64().expect("signed up") };
    (shopper, cookies.join("; "))
}

/// A sale day touches every kind of key: sign-ups with challenges and a quota, wrong
/// passwords (from an address and from a known browser) and a right one, a sale of two shards with
/// grants, a refusal, a cancelled order's unit back, and stock added. Then every key
/// under the namespace fits one row of the table and lives as the row says: with the
/// sale (its window's `expires`), never expiring, or at most the row's constant.
#[tokio::test]
async fn every_key_lives_as_the_key_table_says() {
    let app = TestApp::with(Options::default().with(|c| (c.sign_up_quota, c.sign_up_challenge) = (100, true))).await;
    let (ann, anns_browser) = sign_up(&app, "ann").await;
    let (bob, _) = sign_up(&app, "bob").await;
    let wrong = json!({ "name": "ann", "password": "not ann's password" });
    assert_eq!(app.call("sign_in", wrong.clone(), &[]).await.0, 401);
    assert_eq!(app.call("sign_in", wrong, &[("cookie", &anns_browser)]).await.0, 401);
    assert_eq!(app.call("sign_in", json!({ "name": "bob", "password": PASSWORD }), &[]).await.0, 200);

    let v = app.create_sharded(5, (-5, 600), 2).await;
    for shopper in [&ann, &bob] {
        assert_eq!(app.grab(shopper, v).await.0, 200);
    }
    let (status, body) = app.grab(&ann, v).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "already_bought"), "{body}");
    // Settled too (nothing pending): settling gives the gate's results and buyers
    // their expiry, after the orders are saved.
    app.wait_for_stats("both persisted and settled", v, |s| s["persisted"] == 2 && s["pending"] == 0).await;
    let (_, orders) = app.call("my_orders", json!({}), &[("cookie", &ann.cookie)]).await;
    let order_id = orders["items"][0]["order_id"].as_str().unwrap().to_owned();
    let (status, body) = app.call("cancel_order", json!({ "order_id": order_id }), &[("cookie", &ann.cookie)]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(app.operator("add_stock", json!({ "voucher_id": v, "units": 1 })).await.0, 200);

    let table = table();
    assert!(table.len() >= 20, "{} rows read", table.len());
    let mut redis = app.redis.clone();
    let keys: Vec<String> = redis.keys(format!("{}:*", app.namespace)).await.unwrap();
    let mut rows_met = std::collections::BTreeSet::new();
    for key in &keys {
        let rows: Vec<&Row> = table.iter().filter(|r| fits(&r.pattern.replace("<ns>", &app.namespace), key)).collect();
        assert_eq!(rows.len(), 1, "{key} fits {} rows of the key table", rows.len());
        let row = rows[0];
        rows_met.insert(row.pattern.clone());
        let ttl_ms: i64 = redis::cmd("PTTL").arg(key).query_async(&mut redis).await.unwrap();
        match row.expires.as_str() {
            "with the sale" => {
                let tag = &key[..key.rfind("}:").expect("a sale's key has its hash tag") + 2];
                let expires: i64 = redis.hget(format!("{tag}window"), "expires").await.unwrap();
                let at: i64 = redis::cmd("PEXPIRETIME").arg(key).query_async(&mut redis).await.unwrap();
                assert_eq!(at, expires, "{key} expires with its sale");
            }
            "never" => assert_eq!(ttl_ms, -1, "{key} never expires"),
            expires => {
                let longest = kept(expires).unwrap_or_else(|| panic!("{key}: {expires} is no key's expiry"));
                assert!(ttl_ms > 0 && ttl_ms as u128 <= longest.as_millis(), "{key}: {ttl_ms} ms to live, {expires}");
            }
        }
    }
    // Every kind of key the day made was met (dead letters need a failing worker).
    for kind in ["stock", "buyers", "window", "orders", "results", "refused", "restocked", "changes"] {
        assert!(rows_met.contains(&format!("<ns>:{{v<id>}}:{kind}")), "no {kind} key: {keys:?}");
    }
    for prefix in [
        "<ns>:sales_version",
        "<ns>:last_sale",
        "<ns>:icr:",
        "<ns>:attempts:",
        "<ns>:sign_ups:",
        "<ns>:sign_ins:",
        "<ns>:sign_up_challenge:",
    ] {
        assert!(rows_met.iter().any(|p| p.starts_with(prefix)), "no key of {prefix}: {keys:?}");
    }
    assert!(rows_met.contains("<ns>:worker:<name>") && rows_met.contains("<ns>:attempts:known:<cookie>"));
    app.stop().await;
}

#[test]
fn a_pattern_fits_its_keys_only() {
    assert!(fits("<ns>:{v<id>}:stock", "s:{v42}:stock"));
    assert!(fits("<ns>:{v<id>}:stock", "s:{v42.1.3}:stock"), "a bucket's tag");
    assert!(!fits("<ns>:{v<id>}:stock", "s:{v42}:stocks"));
    assert!(fits("<ns>:attempts:{<who>}:<address>", "s:attempts:{name:7}:127.0.0.1"));
    assert!(!fits("<ns>:attempts:{<who>}", "s:attempts:{name:7}:127.0.0.1"));
    assert!(fits("<ns>:attempts:{<who>}:<address>", "s:attempts:{op:1}:2001:db8::/48"));
    assert!(!fits("<ns>:sign_ups:<minute>", "s:sign_ups:addr:127.0.0.1:498842"));
}
