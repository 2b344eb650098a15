//! The JSON API refuses bad input with 4xx and a stable code, never 5xx.

use crate::support::{code, Options, Shopper, TestApp, ADMIN_TOKEN, PASSWORD};
use serde_json::{json, Value};

#[tokio::test]
async fn bad_input_gets_4xx_with_invalid_input() {
    let app = TestApp::spawn().await;
    let ann = app.sign_in("ann").await;
    let cookie = [("cookie", ann.cookie.as_str())];
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let admin = [("authorization", auth.as_str())];

    // Malformed JSON, missing fields, wrong types.
    let raw = app
        .http
        .post(format!("{}/api/grab", app.base))
        .header("content-type", "application/json")
        .header("cookie", &ann.cookie)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 400);
    let body: serde_json::Value = raw.json().await.unwrap();
    assert_eq!(code(&body), "invalid_input");
    for body in [
        json!({}),
        json!({ "voucher_id": "seven" }),
        json!({ "voucher_id": 1.5 }),
        json!({ "voucher_id": null }),
        json!("7"),
        // A struct's fields in order: serde's other form, which no client is told of.
        json!([7, null]),
    ] {
        let (status, answer) = app.call("grab", body.clone(), &cookie).await;
        assert_eq!((status.as_u16(), code(&answer)), (400, "invalid_input"), "{body}");
    }
    for name in ["list_vouchers", "me", "sign_in"] {
        let (status, answer) = app.call(name, json!([]), &[]).await;
        assert_eq!((status.as_u16(), code(&answer)), (400, "invalid_input"), "{name}");
    }
    let (status, answer) = app.call("sign_in", json!({ "name": "   " }), &[]).await;
    assert_eq!((status.as_u16(), code(&answer)), (400, "invalid_input"));
    // An order id is 1 to 19 digits and nothing else, as the document's pattern says
    // (before, " 12" and "+12" were taken).
    for order_id in ["12x", " 12", "+12", "-12", "", "12345678901234567890"] {
        let body = json!({ "voucher_id": 1, "order_id": order_id });
        let (status, answer) = app.call("grab_result", body, &cookie).await;
        assert_eq!((status.as_u16(), code(&answer), &answer["param"]), (400, "invalid_input", &json!("order_id")));
    }
    // A name with a control character anywhere is refused, as the document's pattern
    // says (before, a tab at an end was trimmed away).
    let (status, answer) = app.call("sign_up", json!({ "name": "\tbob", "password": "a long pass phrase" }), &[]).await;
    assert_eq!((status.as_u16(), code(&answer), &answer["param"]), (400, "invalid_input", &json!("name")));
    // A missing field is named too, and so is one of the wrong type, nested ones by
    // their path (before, a wrong type named none: the decoder gives a line and a column).
    let (status, answer) = app.call("grab", json!({}), &cookie).await;
    assert_eq!((status.as_u16(), &answer["param"]), (400, &json!("voucher_id")), "{answer}");
    let challenge = json!({ "algorithm": "SHA-256", "challenge": "c", "number": "7", "salt": "s", "signature": "x" });
    let unsolved = json!({ "algorithm": "SHA-256", "challenge": "c", "number": 7, "signature": "x" });
    for (call, body, headers, field) in [
        ("grab", json!({ "voucher_id": "seven" }), &cookie[..], "voucher_id"),
        ("grab_result", json!({ "voucher_id": 1, "order_id": 12 }), &cookie[..], "order_id"),
        ("add_stock", json!({ "voucher_id": 1, "units": "5" }), &admin[..], "units"),
        ("list_vouchers", json!({ "limit": "5" }), &[], "limit"),
        ("sign_up", json!({ "name": "cy", "password": PASSWORD, "challenge": challenge }), &[], "challenge.number"),
        ("sign_up", json!({ "name": "cy", "password": PASSWORD, "challenge": unsolved }), &[], "challenge.salt"),
        ("set_operator_role", json!({ "name": "cy", "role": "owner" }), &admin[..], "role"),
    ] {
        let (status, answer) = app.call(call, body, headers).await;
        let got = (status.as_u16(), code(&answer), answer["param"].as_str());
        assert_eq!(got, (400, "invalid_input", Some(field)), "{call}: {answer}");
        let message = answer["message"].as_str().unwrap();
        assert!(message.contains(&format!("{field}: ")), "the words name it too: {message}");
    }
    // Past a limit the document states, the refusal names the field (before, a password
    // to check past 128 characters named none, and a cursor of 20 digits or more, zeros
    // first, was taken though the document says at most 19).
    let long = "p".repeat(129);
    let zeros = format!("{}7", "0".repeat(19));
    for (call, body, headers, field) in [
        ("sign_in", json!({ "name": "cy", "password": long }), &[][..], "password"),
        ("operator_sign_in", json!({ "name": "cy", "password": long }), &[], "password"),
        ("change_password", json!({ "current": long, "new": PASSWORD }), &cookie[..], "current"),
        ("list_vouchers", json!({ "after": zeros }), &[], "after"),
        ("list_orders", json!({ "voucher_id": 1, "status": "Paid" }), &admin[..], "status"),
    ] {
        let (status, answer) = app.call(call, body, headers).await;
        let got = (status.as_u16(), code(&answer), answer["param"].as_str());
        assert_eq!(got, (400, "invalid_input", Some(field)), "{call}: {answer}");
    }
    // JSON that does not parse names no field: the fault may be inside a key the call
    // does not have, the caller's own words.
    for unparsed in [r#"{"<script>": tru}"#, r#"{"limit": 5,}"#] {
        let res = app.http.post(format!("{}/api/list_vouchers", app.base)).header("content-type", "application/json");
        let answer: Value = res.body(unparsed).send().await.unwrap().json().await.unwrap();
        assert_eq!((code(&answer), &answer["param"]), ("invalid_input", &Value::Null), "{unparsed}: {answer}");
    }
    let (status, answer) = app.call("list_vouchers", json!({ "limit": 0 }), &[]).await;
    assert_eq!((status.as_u16(), &answer["param"]), (400, &json!("limit")), "{answer}");

    // Each refusal names the field it is about (`param`).
    let now = chrono::Utc::now();
    let at = |s: i64| (now + chrono::Duration::seconds(s)).to_rfc3339();
    let at_us = |us: i64| {
        let whole_ms = chrono::DateTime::from_timestamp_millis(now.timestamp_millis()).unwrap();
        (whole_ms + chrono::Duration::microseconds(us)).to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
    };
    for (title, stock, begins, ends, price, want) in [
        ("", 10, at(0), at(60), 0, ("invalid_input", "title")),
        ("x", 0, at(0), at(60), 0, ("invalid_input", "stock")),
        ("x", 10_000_001, at(0), at(60), 0, ("invalid_input", "stock")),
        ("x", 10, at(60), at(0), 0, ("invalid_time", "ends_at")),
        // An end under a millisecond after the start: the same millisecond as stored
        // (before, the database refused it, and the call answered `unavailable`).
        ("x", 10, at_us(60_000_000), at_us(60_000_500), 0, ("invalid_time", "ends_at")),
        ("x", 10, "soon".to_owned(), at(60), 0, ("invalid_time", "begins_at")),
        ("x", 10, at(-120), at(-60), 0, ("invalid_time", "ends_at")),
        // Years no client reads back in UTC (-0001, +10000), a window of over a month,
        // a start over a year away.
        ("x", 10, "0000-01-01T00:00:00+01:00".to_owned(), at(60), 0, ("invalid_time", "ends_at")),
        ("x", 10, at(0), "9999-12-31T23:59:59-05:00".to_owned(), 0, ("invalid_time", "ends_at")),
        ("x", 10, at(0), at(32 * 86_400), 0, ("invalid_time", "ends_at")),
        ("x", 10, at(367 * 86_400), at(367 * 86_400 + 60), 0, ("invalid_time", "begins_at")),
        ("x", 10, at(0), at(60), -1, ("invalid_price", "price")),
        ("x", 10, at(0), at(60), 500, ("face_value_below_price", "face_value")),
    ] {
        let face_value = price.max(0) / 2;
        let body = json!({ "title": title, "stock": stock, "begins_at": begins, "ends_at": ends, "price": price,
                           "face_value": face_value });
        let (status, answer) = app.call("create_voucher", body.clone(), &admin).await;
        let got = (status.as_u16(), code(&answer), answer["param"].as_str().unwrap_or_default());
        assert_eq!(got, (400, want.0, want.1), "{body}");
        assert!(answer["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    app.stop().await;
}

#[tokio::test]
async fn admin_calls_need_the_token() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, -5, 3600).await;
    let body =
        json!({ "title": "t", "stock": 1, "begins_at": "2030-01-01T00:00:00Z", "ends_at": "2030-01-02T00:00:00Z" });
    for (name, body) in
        [("create_voucher", body), ("warm_up", json!({ "voucher_id": v })), ("sale_stats", json!({ "voucher_id": v }))]
    {
        let (status, answer) = app.call(name, body.clone(), &[]).await;
        assert_eq!((status.as_u16(), code(&answer)), (401, "admin_required"), "{name}");
        let (status, _) = app.call(name, body, &[("authorization", "Bearer wrong")]).await;
        assert_eq!(status, 401, "{name}");
    }
    // A shopper session is not an operator session.
    let ann = app.sign_in("ann").await;
    let (status, _) = app.call("sale_stats", json!({ "voucher_id": v }), &[("cookie", &ann.cookie)]).await;
    assert_eq!(status, 401);
    let (status, _) = app.call("admin_sign_in", json!({ "token": "nope" }), &[]).await;
    assert_eq!(status, 401);
    app.stop().await;
}

/// Who is signed in is asked on every page view: the session cookie answers it, with
/// no database read, so it answers while the database cannot.
#[tokio::test]
async fn who_is_signed_in_is_answered_without_the_database() {
    let app = TestApp::spawn().await;
    let zoe = app.sign_in("Zoë.Q; x=1").await;
    sqlx::query("ALTER TABLE users RENAME TO users_away").execute(&app.db).await.unwrap();
    let (status, me) = app.call("me", json!({}), &[("cookie", &zoe.cookie)]).await;
    sqlx::query("ALTER TABLE users_away RENAME TO users").execute(&app.db).await.unwrap();
    assert_eq!(status, 200, "{me}");
    let me = &me["user"];
    assert_eq!((me["user_id"].as_i64(), me["name"].as_str()), (Some(zoe.user_id), Some("Zoë.Q; x=1")));
    app.stop().await;
}

#[tokio::test]
async fn same_name_same_user_and_lists_show_remaining_stock() {
    let app = TestApp::spawn().await;
    let a = app.sign_in("carol").await;
    let b = app.sign_in("  carol ").await;
    assert_eq!(a.user_id, b.user_id);
    let (status, me) = app.call("me", json!({}), &[("cookie", &a.cookie)]).await;
    assert_eq!(status, 200);
    assert_eq!(me["user"]["name"], "carol");
    let (_, nobody) = app.call("me", json!({}), &[]).await;
    assert_eq!(nobody, json!({ "user": null }));

    let v = app.create_voucher(4, -5, 3600).await;
    assert_eq!(app.grab(&a, v).await.0, 200);
    let (status, list) = app.call("list_vouchers", json!({}), &[]).await;
    assert_eq!(status, 200);
    let listed = list["items"].as_array().unwrap().iter().find(|x| x["id"] == v).unwrap().clone();
    assert_eq!(listed["remaining"], 3);
    assert_eq!(listed["stock"], 4);
    assert!(listed["begins_at"].as_str().unwrap().parse::<chrono::DateTime<chrono::Utc>>().is_ok());
    app.stop().await;
}

/// A cross-site form can send `text/plain` or a form body with the shopper's cookies,
/// or any body with a foreign `Origin`: none of it may act.
#[tokio::test]
async fn cross_site_and_non_json_calls_change_nothing() {
    let app = TestApp::spawn().await;
    let ann = app.sign_in("ann").await;
    let v = app.create_voucher(5, -5, 3600).await;
    let post = |content_type: &'static str, extra: Option<(&'static str, &'static str)>| {
        let mut req = app
            .http
            .post(format!("{}/api/grab", app.base))
            .header("content-type", content_type)
            .header("cookie", &ann.cookie)
            .body(format!(r#"{{"voucher_id":{v}}}"#));
        if let Some((k, val)) = extra {
            req = req.header(k, val);
        }
        async move {
            let res = req.send().await.unwrap();
            (res.status().as_u16(), res.json::<serde_json::Value>().await.unwrap())
        }
    };
    for content_type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
        let (status, body) = post(content_type, None).await;
        assert_eq!((status, code(&body)), (415, "unsupported_media_type"), "{content_type}");
    }
    let (status, body) = post("application/json", Some(("origin", "https://evil.example"))).await;
    assert_eq!((status, code(&body)), (403, "cross_site"));
    let (status, body) = post("application/json", Some(("sec-fetch-site", "cross-site"))).await;
    assert_eq!((status, code(&body)), (403, "cross_site"));
    let stats = app.stats(v).await;
    assert_eq!((stats["redis_stock"].as_i64(), stats["granted"].as_i64()), (Some(5), Some(0)), "nothing granted");

    // Signing in or out, and the admin door, are guarded the same way.
    let form = app.http.post(format!("{}/api/sign_in", app.base)).header("content-type", "text/plain");
    let res = form.body(r#"{"name":"mallory"}"#).send().await.unwrap();
    assert_eq!(res.status(), 415);
    assert!(res.headers().get("set-cookie").is_none());
    let res = app
        .http
        .post(format!("{}/api/admin_sign_in", app.base))
        .header("content-type", "application/json")
        .header("origin", "https://evil.example")
        .body(format!(r#"{{"token":"{ADMIN_TOKEN}"}}"#))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);

    // The same call from this site works.
    let origin = app.base.clone();
    let (status, body) =
        app.call("grab", json!({ "voucher_id": v }), &[("cookie", &ann.cookie), ("origin", &origin)]).await;
    assert_eq!(status, 200, "{body}");
    app.stop().await;
}

#[tokio::test]
async fn unknown_paths_and_wrong_methods_answer_json() {
    let app = TestApp::spawn().await;
    let (status, body) = app.call("no_such_call", json!({}), &[]).await;
    assert_eq!((status.as_u16(), code(&body)), (404, "not_found"));
    let res = app.http.get(format!("{}/api/grab", app.base)).send().await.unwrap();
    assert_eq!(res.status(), 405);
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(code(&body), "method_not_allowed");
    // The live feed is a GET: a POST is told of the method its Allow header names
    // (before, the message said every API call is a POST).
    let res = app.http.post(format!("{}/api/live", app.base)).json(&json!({})).send().await.unwrap();
    assert_eq!((res.status().as_u16(), res.headers().get("allow").cloned()), (405, Some("GET".parse().unwrap())));
    let body: serde_json::Value = res.json().await.unwrap();
    assert!(!body["message"].as_str().unwrap_or_default().contains("POST"), "{body}");
    let res = app.http.get(format!("{}/api/deep/unknown/path", app.base)).send().await.unwrap();
    assert_eq!(res.status(), 404);
    assert_eq!(code(&res.json::<serde_json::Value>().await.unwrap()), "not_found");
    app.stop().await;
}

/// A script hammering from one session, or from one address, is slowed down with 429
/// and `Retry-After`; other sessions are not.
#[tokio::test]
async fn rate_limits_stop_a_hammering_session_and_address() {
    let app = TestApp::with(Options::default().with(|c| c.rate_per_session = 3)).await;
    let v = app.create_voucher(5, -5, 3600).await;
    let ann = app.sign_in("ann").await;
    let bob = app.sign_in("bob").await;
    let ask = |who: &Shopper| {
        let cookie = who.cookie.clone();
        let app = &app;
        async move {
            let url = format!("{}/api/grab_result", app.base);
            let body = json!({ "voucher_id": v, "order_id": "1" });
            app.http.post(url).json(&body).header("cookie", cookie).send().await.unwrap()
        }
    };
    // Calls back to back outrun 3 a second (6 in a burst) on any machine. The refusal
    // is judged on itself: the next call may come after a token was added again.
    let mut limited = None;
    for _ in 0..20 {
        let res = ask(&ann).await;
        if res.status() == 429 {
            limited = Some(res);
            break;
        }
    }
    let res = limited.expect("20 calls back to back from one session meet the limit");
    let retry: u64 = res.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry), "Retry-After {retry}");
    assert_eq!(code(&res.json::<Value>().await.unwrap()), "rate_limited");
    assert_ne!(ask(&bob).await.status(), 429, "another session is not slowed down");
    app.stop().await;

    let app = TestApp::with(Options::default().with(|c| c.rate_per_address = 3)).await;
    let sign_in = |i| json!({ "name": format!("n{i}"), "password": "a guessed password" });
    let answers = futures::future::join_all((0..20).map(|i| app.call("sign_in", sign_in(i), &[]))).await;
    assert!(
        answers.iter().any(|(s, b)| *s == 429 && code(b) == "rate_limited"),
        "one address signing in 20 names at once"
    );
    app.stop().await;
}

/// The server serves its contract (the checked-in copy, `docs/openapi.json`), and every
/// path the contract names is routed, with the method it names: asked without
/// credentials or a body, none answers `not_found` or `method_not_allowed`.
#[tokio::test]
async fn the_served_document_is_the_checked_in_one_and_every_path_in_it_is_routed() {
    let app = TestApp::spawn().await;
    let served = app.http.get(format!("{}/api/openapi.json", app.base)).send().await.unwrap();
    assert_eq!(served.status(), 200);
    let served: Value = served.json().await.unwrap();
    let checked_in = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.json")).unwrap();
    assert_eq!(served, serde_json::from_str::<Value>(&checked_in).unwrap());
    let paths = served["paths"].as_object().unwrap();
    assert!(paths.len() > 40, "{} paths", paths.len());
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            let url = format!("{}{path}", app.base);
            let request = match method.as_str() {
                "get" => app.http.get(url),
                "post" => app.http.post(url).header("content-type", "application/json").body("{}"),
                other => panic!("{path}: {other}"),
            };
            let answer = request.send().await.unwrap();
            let status = answer.status().as_u16();
            let json = answer.headers()["content-type"].to_str().unwrap().starts_with("application/json");
            let body: Value = if json { answer.json().await.unwrap() } else { Value::Null };
            assert!(status != 405 && code(&body) != "not_found", "{method} {path}: {status} {body}");
        }
    }
}

/// The calls the API document says set cookies do, each of them; any other call that
/// set one would trip the check in `auth::caller::set_cookie` in this debug build.
#[tokio::test]
async fn the_calls_that_set_cookies_are_the_documented_ones() {
    let app = TestApp::spawn().await;
    let document: Value =
        app.http.get(format!("{}/api/openapi.json", app.base)).send().await.unwrap().json().await.unwrap();
    let paths = document["paths"].as_object().unwrap();
    let mut documented: Vec<&str> = paths
        .iter()
        .filter(|(_, item)| item["post"]["responses"]["200"]["headers"].get("Set-Cookie").is_some())
        .map(|(path, _)| path.trim_start_matches("/api/"))
        .collect();
    // POSTs `body` to `/api/<call>` with `cookie`; its status and the cookies it set.
    let post = |call: &'static str, body: Value, cookie: String| {
        let req = app.http.post(format!("{}/api/{call}", app.base)).header("cookie", cookie).json(&body);
        async move {
            let res = req.send().await.unwrap();
            let set: Vec<String> =
                res.headers().get_all("set-cookie").iter().map(|v| v.to_str().unwrap().into()).collect();
            let jar = set.iter().filter_map(|c| c.split(';').next()).collect::<Vec<_>>().join("; ");
            assert_eq!(res.status(), 200, "{call}: {}", res.text().await.unwrap());
            (call, jar)
        }
    };
    let (new, op) = ("another long password", "an operator's password");
    let mut seen = Vec::new();
    let mut step = |(call, jar): (&'static str, String)| {
        assert!(!jar.is_empty(), "{call} set no cookie");
        seen.push(call);
        jar
    };
    let ann = json!({ "name": "cookie-ann", "password": PASSWORD });
    let cookie = step(post("sign_up", ann.clone(), String::new()).await);
    let cookie = step(post("sign_in", ann, cookie).await);
    let change = json!({ "current": PASSWORD, "new": new });
    let cookie = step(post("change_password", change, cookie).await);
    step(post("sign_out_everywhere", json!({}), cookie).await);
    let cookie = step(post("sign_in", json!({ "name": "cookie-ann", "password": new }), String::new()).await);
    step(post("sign_out", json!({}), cookie).await);
    step(post("admin_sign_in", json!({ "token": ADMIN_TOKEN }), String::new()).await);
    app.admin("add_operator", json!({ "name": "cookie-olga", "password": op, "role": "operator" })).await;
    let cookie = step(post("operator_sign_in", json!({ "name": "cookie-olga", "password": op }), String::new()).await);
    step(post("change_operator_password", json!({ "current": op, "new": new }), cookie).await);
    seen.sort_unstable();
    seen.dedup();
    documented.sort_unstable();
    assert_eq!(seen, documented);
    app.stop().await;
}
