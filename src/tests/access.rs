//! The access table, walked against the running server: every route whose entry is not
//! "anyone" is called for real, on an existing sale, by each caller its entry excludes,
//! and refuses each before anything happens.

use crate::{
    accounts::operator_sign_in,
    support::{code, TestApp, PASSWORD},
};
use seckill::server::access::{table, Access};
use serde_json::{json, Value};

#[tokio::test]
async fn every_route_refuses_the_callers_its_entry_excludes() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, -5, 3600).await;
    let shopper = app.sign_in("acc-sam").await;
    let (status, _) = app.grab(&shopper, v).await;
    assert_eq!(status, 200);
    for (name, role) in [("acc-olga", "admin"), ("acc-otto", "operator")] {
        let password = format!("{name}'s operator password");
        app.admin("add_operator", json!({ "name": name, "password": password, "role": role })).await;
    }
    let admin = operator_sign_in(&app, "acc-olga", "acc-olga's operator password").await.unwrap();
    let operator = operator_sign_in(&app, "acc-otto", "acc-otto's operator password").await.unwrap();
    let when = |s: i64| (chrono::Utc::now() + chrono::Duration::seconds(s)).to_rfc3339();
    // What any of the calls takes, valid (fields a call does not take are ignored).
    let body = json!({
        "voucher_id": v, "units": 1, "order_id": "1", "name": "acc-otto", "role": "admin",
        "current": PASSWORD, "new": "a brand new password", "password": "a brand new password",
        "title": "Taken over", "stock": 5, "begins_at": when(60), "ends_at": when(600),
        "status": "paid", "limit": 10,
    });
    let logged = || async { app.admin("list_audit", json!({})).await["items"].as_array().unwrap().len() };
    let before = logged().await;

    let mut tried = 0;
    for (path, access) in table() {
        let excluded: Vec<(&str, Option<&str>)> = match access {
            Access::Anyone => continue,
            Access::Shopper => vec![("anonymous", None), ("an operator", Some(&admin))],
            Access::Operator => vec![("anonymous", None), ("a shopper", Some(&shopper.cookie))],
            Access::AdminRole | Access::AdminToken => {
                let mut callers = vec![("anonymous", None), ("a shopper", Some(shopper.cookie.as_str()))];
                callers.push(("an operator", Some(&operator)));
                if access == Access::AdminToken {
                    callers.push(("an operator's cookie", Some(&admin)));
                }
                callers
            }
        };
        for (who, cookie) in excluded {
            let url = format!("{}{path}", app.base);
            let req = if seckill::server::access::method_of(path) == reqwest::Method::GET {
                app.http.get(format!("{url}?voucher_id={v}"))
            } else {
                app.http.post(url).json(&body)
            };
            let req = match cookie {
                Some(cookie) => req.header("cookie", cookie),
                None => req,
            };
            let res = req.send().await.unwrap();
            let status = res.status().as_u16();
            let answer: Value = res.json().await.unwrap_or(Value::Null);
            let wanted = if access == Access::Shopper { "not_signed_in" } else { "admin_required" };
            assert_eq!((status, code(&answer)), (401, wanted), "{path} ({access:?}) called by {who}: {answer}");
            tried += 1;
        }
    }
    assert!(tried > 40, "{tried} calls");
    assert_eq!(logged().await, before, "no operator action went through");
    app.stop().await;
}
