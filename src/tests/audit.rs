//! The operator's log: every operator action, with who, what, before/after and when.

use crate::support::{code, TestApp};
use serde_json::{json, Value};

#[tokio::test]
async fn operator_actions_are_logged_with_who_did_them() {
    let app = TestApp::spawn().await;
    let olga = json!({ "name": "olga", "password": "olga's operator password", "role": "admin" });
    app.admin("add_operator", olga).await;
    let res = app.http.post(format!("{}/api/operator_sign_in", app.base));
    let res = res.json(&json!({ "name": "olga", "password": "olga's operator password" })).send().await.unwrap();
    let olga = res.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    let when = |s: i64| (chrono::Utc::now() + chrono::Duration::seconds(s)).to_rfc3339();
    let voucher = json!({ "title": "Logged", "stock": 4, "begins_at": when(-5), "ends_at": when(600) });
    let (status, created) = app.call("create_voucher", voucher, &[("cookie", &olga)]).await;
    assert_eq!(status, 200, "{created}");
    let v = created["id"].as_i64().unwrap();
    app.admin("warm_up", json!({ "voucher_id": v })).await;

    let log = app.admin("list_audit", json!({ "voucher_id": v })).await;
    let entries = log["items"].as_array().unwrap();
    let said: Vec<(&str, &str)> =
        entries.iter().map(|e| (e["action"].as_str().unwrap(), e["actor"].as_str().unwrap())).collect();
    assert_eq!(said, [("warm_up", "token"), ("create_voucher", "olga")], "newest first: {log}");
    let after: Value = serde_json::from_str(entries[1]["after"].as_str().unwrap()).unwrap();
    assert_eq!((after["title"].as_str(), after["stock"].as_i64()), (Some("Logged"), Some(4)));
    assert!(chrono::DateTime::parse_from_rfc3339(entries[0]["at"].as_str().unwrap()).is_ok());

    let all = app.admin("list_audit", json!({ "voucher_id": null })).await;
    assert!(
        all["items"].as_array().unwrap().iter().any(|e| e["action"] == "add_operator" && e["actor"] == "token"),
        "{all}"
    );
    let shopper = app.sign_in("sam").await;
    let (status, body) = app.call("list_audit", json!({ "voucher_id": v }), &[("cookie", &shopper.cookie)]).await;
    assert_eq!((status.as_u16(), code(&body)), (401, "admin_required"));
    app.stop().await;
}

/// A sale's orders as CSV, for operators: every order once, across pages, in id order.
#[tokio::test]
async fn a_sales_orders_come_out_as_csv() {
    use seckill::testing::{compose, store, OrderMsg};
    let app = TestApp::with(crate::support::Options::default().with(|c| c.worker = false)).await;
    let v = app.create_voucher(2_500, -5, 3600).await;
    // 2,345 shoppers and their orders, straight into the database: more than two pages.
    let n = 2_345;
    sqlx::query(&format!(
        "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < {n}) \
         INSERT INTO users (name, created_at) SELECT 'csv-' || i, 0 FROM k"
    ))
    .execute(&app.db)
    .await
    .unwrap();
    let users: Vec<i64> = sqlx::query_scalar("SELECT id FROM users WHERE name LIKE 'csv-%' ORDER BY id")
        .fetch_all(&app.db)
        .await
        .unwrap();
    let now = chrono::Utc::now().timestamp();
    let msgs: Vec<OrderMsg> = users
        .iter()
        .enumerate()
        .map(|(i, &user_id)| {
            let price = (i % 2 == 0).then_some(250);
            OrderMsg { voucher_id: v, order_id: compose(now, i as u32), user_id, price }
        })
        .collect();
    store::persist(&app.db, &msgs, 3_600_000).await.unwrap();

    let url = format!("{}/api/orders.csv?voucher_id={v}", app.base);
    let res = app.http.get(&url).bearer_auth(crate::support::ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/csv"));
    let csv = res.text().await.unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("order_id,voucher_id,user_id,status,created_at,pay_deadline,cancel_reason,price"));
    let rows: Vec<(i64, String)> = lines
        .map(|l| (l.split(',').next().unwrap().parse().unwrap(), l.rsplit(',').next().unwrap().to_owned()))
        .collect();
    let priced = rows.iter().filter(|(_, price)| price == "250").count();
    assert_eq!(priced, msgs.iter().filter(|m| m.price.is_some()).count(), "each order's price as persisted");
    assert!(rows.iter().all(|(_, price)| price == "250" || price == "0"), "the rest take the voucher's price, 0");
    let ids: Vec<i64> = rows.iter().map(|(id, _)| *id).collect();
    let mut expected: Vec<i64> = msgs.iter().map(|m| m.order_id).collect();
    expected.sort();
    assert_eq!(ids, expected, "every order once, in id order");

    let refused = app.http.get(&url).send().await.unwrap();
    assert_eq!(refused.status(), 401, "operators only");
    let unknown = format!("{}/api/orders.csv?voucher_id=987654", app.base);
    let res = app.http.get(unknown).bearer_auth(crate::support::ADMIN_TOKEN).send().await.unwrap();
    assert_eq!((res.status().as_u16(), code(&res.json::<Value>().await.unwrap())), (404, "unknown_voucher"));
    app.stop().await;
}

/// An operator removed while their export streams gets no further page (review,
/// 2026-11-29): the export asks for the caller's access before each page, as the live
/// feed asks before each frame. A sale of 100,000 orders (about 8 MB of CSV, far more
/// than the sockets between hold while nobody reads); the operator reads the first
/// bytes and is removed, and the rest of the answer is cut short. Before, the removed
/// operator got every order.
#[tokio::test]
async fn an_operator_removed_mid_export_gets_no_further_page() {
    let app = TestApp::with(crate::support::Options::default().with(|c| c.worker = false)).await;
    let v = app.create_voucher(1, -5, 3600).await;
    let shopper = app.sign_in("many-lapsed").await;
    // One shopper's lapsed orders, straight into the database (a cancelled order
    // leaves the shopper free to hold another).
    let n = 100_000;
    sqlx::query(&format!(
        "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < {n}) \
         INSERT INTO orders (id, voucher_id, user_id, status, created_at, pay_deadline, cancelled_at, cancel_reason) \
         SELECT i, $1, $2, 'cancelled', 0, 0, 0, 'timeout' FROM k"
    ))
    .bind(v)
    .bind(shopper.user_id)
    .execute(&app.db)
    .await
    .unwrap();
    let ola = json!({ "name": "ola", "password": "ola's operator password", "role": "operator" });
    app.admin("add_operator", ola).await;
    let cookie = crate::accounts::operator_sign_in(&app, "ola", "ola's operator password").await.unwrap();
    let url = format!("{}/api/orders.csv?voucher_id={v}", app.base);
    let mut res = app.http.get(&url).header("cookie", &cookie).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let lines = |chunk: &[u8]| chunk.iter().filter(|&&b| b == b'\n').count();
    let mut read = lines(&res.chunk().await.unwrap().expect("the first bytes"));
    app.admin("remove_operator", json!({ "name": "ola" })).await;
    let end = loop {
        match res.chunk().await {
            Ok(Some(chunk)) => read += lines(&chunk),
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    assert!(end.is_err(), "the answer is cut short, never ended as a whole file");
    assert!(read < n / 2, "{read} lines of {n} reached an operator removed after the first");
    app.stop().await;
}

/// An operator's call cut short by its caller after its change is made still writes
/// the change to the log (an attack, 2026-11-30: a create_voucher whose connection was
/// reset after its insert, while it warmed the sale, left a sale nobody's log named).
#[tokio::test]
async fn a_change_whose_caller_goes_away_is_still_logged() {
    use tokio::io::AsyncWriteExt;
    let app = TestApp::spawn().await;
    let addr = app.base.trim_start_matches("http://").to_owned();
    let when = |s: i64| (chrono::Utc::now() + chrono::Duration::seconds(s)).to_rfc3339();
    // Many shards: warming them keeps the call busy after its insert.
    let voucher =
        json!({ "title": "Cut short", "stock": 640, "shards": 64, "begins_at": when(-5), "ends_at": when(600) });
    let body = voucher.to_string();
    let head = format!(
        "POST /api/create_voucher HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {}\r\nContent-Length: {}\r\n\r\n",
        crate::support::ADMIN_TOKEN,
        body.len()
    );
    let mut socket = tokio::net::TcpStream::connect(&addr).await.unwrap();
    socket.write_all(format!("{head}{body}").as_bytes()).await.unwrap();
    let made = "SELECT id FROM vouchers WHERE title = 'Cut short'";
    // Polled closely: the cut must come while the call warms the sale.
    let deadline = tokio::time::Instant::now() + crate::support::SETTLED;
    let v = loop {
        if let Some(v) = sqlx::query_scalar::<_, i64>(made).fetch_optional(&app.db).await.unwrap() {
            break v;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for the voucher");
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    };
    // Cut: a reset, as a client that gives up does.
    socket.set_zero_linger().unwrap();
    drop(socket);
    let logged = "SELECT COUNT(*) FROM audit_log WHERE action = 'create_voucher' AND voucher_id = $1";
    crate::support::wait_until("the voucher's creation is logged", crate::support::SETTLED, || async {
        sqlx::query_scalar::<_, i64>(logged).bind(v).fetch_one(&app.db).await.unwrap() == 1
    })
    .await;
    app.stop().await;
}

/// An export asked for while the database cannot be read answers `unavailable` (503,
/// try again), as every call does in an outage; before (a review, 2026-12-02) it
/// answered `internal` (500), which says a bug. The database refuses because the
/// vouchers' table is gone for a moment: the same failure on either engine.
#[tokio::test]
async fn an_export_while_the_database_is_away_answers_unavailable() {
    let app = TestApp::with(crate::support::Options::default().with(|c| c.worker = false)).await;
    let v = app.create_voucher(1, -5, 3600).await;
    let url = format!("{}/api/orders.csv?voucher_id={v}", app.base);
    sqlx::query("ALTER TABLE vouchers RENAME TO vouchers_away").execute(&app.db).await.unwrap();
    let res = app.http.get(&url).bearer_auth(crate::support::ADMIN_TOKEN).send().await.unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap();
    sqlx::query("ALTER TABLE vouchers_away RENAME TO vouchers").execute(&app.db).await.unwrap();
    assert_eq!((status, code(&body)), (503, "unavailable"), "{body}");
    app.stop().await;
}
