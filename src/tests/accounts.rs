//! Accounts: nobody signs in as somebody else, a session can be ended everywhere, and
//! guesses are limited across processes.

use crate::support::{code, wait_until, TestApp, PASSWORD, SOON};
use serde_json::{json, Value};

async fn sign_in(app: &TestApp, name: &str, password: &str) -> (u16, Value) {
    let (status, body) = app.call("sign_in", json!({ "name": name, "password": password }), &[]).await;
    (status.as_u16(), body)
}

/// `me` as the holder of `cookie` sees it: the name, or null.
async fn me(app: &TestApp, cookie: &str) -> Value {
    app.call("me", json!({}), &[("cookie", cookie)]).await.1["name"].clone()
}

#[tokio::test]
async fn nobody_signs_in_as_somebody_else() {
    let app = TestApp::spawn().await;
    let alice = app.sign_in("alice").await;
    assert_eq!(me(&app, &alice.cookie).await, "alice");

    // A name alone, as before passwords, is refused.
    let (status, body) = app.call("sign_in", json!({ "name": "alice" }), &[]).await;
    assert_eq!((status.as_u16(), code(&body)), (400, "invalid_input"), "{body}");
    // A wrong password and an unknown name get the same answer.
    let wrong = sign_in(&app, "alice", "not alice's password").await;
    let unknown = sign_in(&app, "nobody-by-this-name", "not alice's password").await;
    assert_eq!(wrong.0, 401);
    assert_eq!(code(&wrong.1), "bad_credentials");
    assert_eq!(wrong, unknown, "the answer never says whether the name exists");
    // Her name cannot be taken again, and a weak password is refused.
    let (status, body) = app.call("sign_up", json!({ "name": "alice", "password": "another password" }), &[]).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "name_taken"), "{body}");
    for weak in ["short", "password123", "Qwertyuiop"] {
        let (status, body) = app.call("sign_up", json!({ "name": "mallory", "password": weak }), &[]).await;
        assert_eq!((status.as_u16(), code(&body)), (400, "invalid_input"), "{weak}: {body}");
    }
    // Her own password works, from a new session.
    let (status, body) = sign_in(&app, "alice", PASSWORD).await;
    assert_eq!((status, body["user_id"].as_i64()), (200, Some(alice.user_id)), "{body}");

    // An account from before passwords (a name alone made it) cannot be claimed.
    sqlx::query("INSERT INTO users (name, created_at) VALUES ('legacy', 0)").execute(&app.db).await.unwrap();
    let (status, body) = app.call("sign_up", json!({ "name": "legacy", "password": "mine now, surely" }), &[]).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "name_taken"), "{body}");
    assert_eq!(sign_in(&app, "legacy", "mine now, surely").await.0, 401);
    app.stop().await;
}

#[tokio::test]
async fn a_session_signed_out_stays_out_even_when_copied() {
    let app = TestApp::spawn().await;
    let here = app.sign_in("bea").await;
    let elsewhere = app.sign_in("bea").await;
    let (status, _) = app.call("sign_out", json!({}), &[("cookie", &here.cookie)]).await;
    assert_eq!(status, 200);
    // The copied cookie is refused by the process that ended it, at once.
    assert_eq!(me(&app, &here.cookie).await, Value::Null);
    let (status, body) = app.call("my_orders", json!({}), &[("cookie", &here.cookie)]).await;
    assert_eq!((status.as_u16(), code(&body)), (401, "not_signed_in"));
    assert_eq!(me(&app, &elsewhere.cookie).await, "bea", "her other session goes on");
    app.stop().await;
}

/// Signing out everywhere, and changing the password, end the account's other
/// sessions on every process within seconds (the other process here learns it from the
/// database, with no request of its own reading it).
#[tokio::test]
async fn ending_every_session_reaches_every_process() {
    let a = TestApp::spawn().await;
    let b = TestApp::with(a.restart_options()).await;
    let (phone, laptop) = (a.sign_in("cai").await, a.sign_in("cai").await);
    assert_eq!(me(&b, &laptop.cookie).await, "cai");

    let (status, _) = a.call("sign_out_everywhere", json!({}), &[("cookie", &phone.cookie)]).await;
    assert_eq!(status, 200);
    assert_eq!(me(&a, &laptop.cookie).await, Value::Null, "this process at once");
    wait_until("the other process refuses the laptop's session", SOON, || async {
        me(&b, &laptop.cookie).await == Value::Null
    })
    .await;

    // A new password: the session that changed it goes on (with a new cookie), the
    // others end, and the old password no longer works.
    let (tablet, desk) = (b.sign_in("cai").await, b.sign_in("cai").await);
    let change = json!({ "current": PASSWORD, "new": "cai's brand new password" });
    let res = a.http.post(format!("{}/api/change_password", a.base)).header("cookie", &tablet.cookie).json(&change);
    let res = res.send().await.unwrap();
    assert_eq!(res.status(), 200);
    let renewed = res.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    assert_eq!(me(&a, &renewed).await, "cai");
    wait_until("the other process refuses the old sessions", SOON, || async {
        me(&b, &desk.cookie).await == Value::Null && me(&b, &tablet.cookie).await == Value::Null
    })
    .await;
    assert_eq!(me(&b, &renewed).await, "cai");
    assert_eq!(sign_in(&b, "cai", PASSWORD).await.0, 401);
    assert_eq!(sign_in(&b, "cai", "cai's brand new password").await.0, 200);
    b.stop().await;
    a.stop().await;
}

/// Guesses at one account are counted across processes: past the free attempts, even
/// the right password waits, and the answer says how long.
#[tokio::test]
async fn guesses_at_an_account_are_limited_across_processes() {
    let a = TestApp::spawn().await;
    let b = TestApp::with(a.restart_options()).await;
    a.sign_in("dana").await;
    for i in 0..5 {
        let app = if i % 2 == 0 { &a } else { &b };
        assert_eq!(sign_in(app, "dana", &format!("guess number {i}")).await.0, 401, "guess {i}");
    }
    // The sixth attempt runs (and fails); the seventh must wait.
    assert_eq!(sign_in(&b, "dana", "guess number 5").await.0, 401);
    let res = b.http.post(format!("{}/api/sign_in", b.base)).json(&json!({ "name": "dana", "password": PASSWORD }));
    let res = res.send().await.unwrap();
    assert_eq!(res.status(), 429, "the right password waits too");
    let retry: u64 = res.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=30).contains(&retry), "told when to retry (at most the first wait, 30 s): {retry}");
    let body: Value = res.json().await.unwrap();
    assert_eq!(code(&body), "rate_limited");
    assert_eq!(sign_in(&a, "dana", PASSWORD).await.0, 429, "on every process");
    // Another account from the same address is not locked by these guesses.
    a.sign_in("eli").await;
    assert_eq!(sign_in(&a, "eli", PASSWORD).await.0, 200);
    b.stop().await;
    a.stop().await;
}

/// An admin call as the holder of `cookie`: status and body.
async fn as_operator(app: &TestApp, cookie: &str, call: &str, body: Value) -> (u16, Value) {
    let (status, body) = app.call(call, body, &[("cookie", cookie)]).await;
    (status.as_u16(), body)
}

/// The admin cookie an operator's sign-in sets (or the refusal).
async fn operator_sign_in(app: &TestApp, name: &str, password: &str) -> Result<String, (u16, Value)> {
    let res = app.http.post(format!("{}/api/operator_sign_in", app.base));
    let res = res.json(&json!({ "name": name, "password": password })).send().await.unwrap();
    let status = res.status().as_u16();
    let cookie = res.headers().get("set-cookie").map(|c| c.to_str().unwrap().split(';').next().unwrap().to_owned());
    let body: Value = res.json().await.unwrap();
    cookie.filter(|_| status == 200).ok_or((status, body))
}

/// Operators are named and have roles: the token (bootstrap) adds an admin, who adds
/// an operator; an operator runs sales but cannot add operators; shopper accounts are
/// not operator accounts.
#[tokio::test]
async fn named_operators_with_roles() {
    let app = TestApp::spawn().await;
    let olga = json!({ "name": "olga", "password": "olga's operator password", "role": "admin" });
    assert_eq!(app.admin("add_operator", olga).await, json!({ "name": "olga", "role": "admin" }));
    let olga = operator_sign_in(&app, "olga", "olga's operator password").await.unwrap();
    assert_eq!(as_operator(&app, &olga, "operator_me", json!({})).await.1, json!({ "name": "olga", "role": "admin" }));

    let otto = json!({ "name": "otto", "password": "otto's operator password", "role": "operator" });
    assert_eq!(as_operator(&app, &olga, "add_operator", otto.clone()).await.0, 200);
    assert_eq!(code(&as_operator(&app, &olga, "add_operator", otto).await.1), "name_taken");
    let otto = operator_sign_in(&app, "otto", "otto's operator password").await.unwrap();
    let when = |s: i64| (chrono::Utc::now() + chrono::Duration::seconds(s)).to_rfc3339();
    let voucher = json!({ "title": "Otto's", "stock": 3, "begins_at": when(-5), "ends_at": when(600) });
    assert_eq!(as_operator(&app, &otto, "create_voucher", voucher).await.0, 200, "an operator runs sales");
    let eve = json!({ "name": "eve", "password": "eve's operator password", "role": "admin" });
    let (status, body) = as_operator(&app, &otto, "add_operator", eve).await;
    assert_eq!((status, code(&body)), (401, "admin_required"), "only admins add operators: {body}");

    // Wrong passwords, unknown operators and shoppers' accounts are refused alike.
    let shopper = app.sign_in("sam").await;
    for (name, password) in [("otto", "not otto's password"), ("nobody", "whatever it is"), ("sam", PASSWORD)] {
        let (status, body) = operator_sign_in(&app, name, password).await.unwrap_err();
        assert_eq!((status, code(&body)), (401, "bad_credentials"), "{name}");
    }
    let (status, body) = as_operator(&app, &shopper.cookie, "list_orders", json!({ "voucher_id": 1 })).await;
    assert_eq!((status, code(&body)), (401, "admin_required"), "a shopper's session is no operator's");
    app.stop().await;
}

/// `seckill operator add NAME` makes an operator in the configured database, the
/// password read from standard input; the running server signs them in.
#[tokio::test]
async fn the_command_line_adds_an_operator() {
    use tokio::io::AsyncWriteExt;
    let app = TestApp::spawn().await;
    let add = |name: &'static str, password: &'static str| {
        let database_url = app.database_url.clone();
        async move {
            let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_seckill"))
                .args(["operator", "add", name, "--role", "admin"])
                .env("DATABASE_URL", database_url)
                .env("SECKILL_PASSWORD_MEMORY_KIB", crate::support::TEST_PASSWORD_COST.0.to_string())
                .env("SECKILL_PASSWORD_ITERATIONS", crate::support::TEST_PASSWORD_COST.1.to_string())
                .env("RUST_LOG", "error")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(format!("{password}\n").as_bytes()).await.unwrap();
            let out = tokio::time::timeout(SOON, child.wait_with_output()).await.unwrap().unwrap();
            let said = String::from_utf8_lossy(if out.status.success() { &out.stdout } else { &out.stderr });
            (out.status.success(), said.trim().to_owned())
        }
    };
    assert_eq!(add("cli-olga", "olga set this one up").await, (true, "operator cli-olga added (admin)".into()));
    let (ok, said) = add("cli-olga", "another good password").await;
    assert!(!ok && said.contains("exists already"), "{said}");
    let (ok, said) = add("cli-weak", "password1").await;
    assert!(!ok && said.contains("most common"), "{said}");
    assert!(operator_sign_in(&app, "cli-olga", "olga set this one up").await.is_ok());
    app.stop().await;
}

/// Wrong admin tokens sent as bearer are guesses too: past the free ones they wait
/// (429) without being checked, while the right token keeps working.
#[tokio::test]
async fn guesses_at_the_admin_token_are_limited() {
    let app = TestApp::spawn().await;
    let with_token = |token: &str| {
        let res = app.http.post(format!("{}/api/operator_me", app.base)).bearer_auth(token).json(&json!({}));
        async move { res.send().await.unwrap() }
    };
    let answers: Vec<u16> =
        futures::future::join_all((0..10).map(|i| with_token(&format!("guess-{i:02}-at-the-token"))))
            .await
            .iter()
            .map(|r| r.status().as_u16())
            .collect();
    // Five free guesses and the one that starts the wait are checked (operator_me
    // answers a stranger null); the four sent with them wait, however close together.
    let checked = answers.iter().filter(|s| **s == 200).count();
    assert_eq!((checked, answers.iter().filter(|s| **s == 429).count()), (6, 4), "{answers:?}");
    let late = with_token("one-more-guess-at-the-token").await;
    assert_eq!(late.status(), 429, "guesses past the free ones wait");
    assert!(late.headers().contains_key("retry-after"));
    let right = with_token(crate::support::ADMIN_TOKEN).await;
    assert_eq!(right.status(), 200);
    assert_eq!(right.json::<Value>().await.unwrap(), json!({ "name": "token", "role": "admin" }));
    app.stop().await;
}

/// A busy password hasher answers `unavailable` at once, before the attempt counts:
/// a shopper whose sign-ins met a full queue is never locked out by it.
#[tokio::test]
async fn a_busy_hasher_refuses_at_once_and_costs_no_attempt() {
    // One hash at a time, none waiting, each at OWASP's cost (milliseconds): the
    // sign-ins sent together meet a busy hasher.
    let app = TestApp::with(crate::support::Options::default().with(|c| {
        c.hash_threads = Some(1);
        c.hash_queue = 0;
        (c.password_memory_kib, c.password_iterations) = (19 * 1024, 2);
    }))
    .await;
    app.sign_in("fay").await;
    let answers = futures::future::join_all((0..40).map(|_| sign_in(&app, "fay", PASSWORD))).await;
    let busy = answers.iter().filter(|(s, b)| *s == 503 && code(b) == "unavailable").count();
    let signed_in = answers.iter().filter(|(s, _)| *s == 200).count();
    assert_eq!(busy + signed_in, answers.len(), "only sign-ins and busy answers: {answers:?}");
    assert!(busy > 0 && signed_in > 0, "{busy} busy, {signed_in} signed in");
    assert_eq!(sign_in(&app, "fay", PASSWORD).await.0, 200, "and she is not locked out");
    app.stop().await;
}
