//! Lists page with a cursor (`limit`, `after`, `has_more`, `next`): every item once,
//! newest first, however the pages are cut, on either database.

use crate::support::{code, TestApp};
use serde_json::{json, Value};

/// Every page of `name` (`args` plus `limit` and `after`), as `call` answers them; the
/// ids (`id_of`) of all their items, in order.
async fn all_pages<F, Fut>(call: F, args: Value, limit: i64, id_of: &str) -> Vec<i64>
where
    F: Fn(Value) -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    let (mut ids, mut after) = (Vec::new(), None::<String>);
    for _ in 0..100 {
        let mut ask = args.clone();
        ask["limit"] = json!(limit);
        if let Some(after) = &after {
            ask["after"] = json!(after);
        }
        let page = call(ask).await;
        let items = page["items"].as_array().unwrap_or_else(|| panic!("{page}"));
        assert!(items.len() as i64 <= limit, "{page}");
        let id = |item: &Value| item[id_of].as_i64().or_else(|| item[id_of].as_str()?.parse().ok()).unwrap();
        ids.extend(items.iter().map(id));
        match page["has_more"].as_bool() {
            Some(true) => {
                assert_eq!(page["next"].as_str().map(str::to_owned), items.last().map(|i| id(i).to_string()), "{page}");
                after = page["next"].as_str().map(str::to_owned);
            }
            Some(false) => {
                assert!(page["next"].is_null(), "{page}");
                return ids;
            }
            None => panic!("{page}"),
        }
    }
    panic!("more than 100 pages")
}

fn newest_first_once(ids: &[i64]) -> bool {
    ids.windows(2).all(|w| w[0] > w[1])
}

#[tokio::test]
async fn every_list_pages_newest_first_with_every_item_once() {
    let app = TestApp::spawn().await;
    let shopper = app.sign_in("pager").await;
    let mut vouchers = Vec::new();
    for _ in 0..5 {
        let v = app.create_voucher(10, -5, 3600).await;
        assert_eq!(app.grab(&shopper, v).await.0, 200);
        vouchers.push(v);
    }
    let buyers = app.sign_in_many("buyer", 6).await;
    for b in &buyers {
        assert_eq!(app.grab(b, vouchers[0]).await.0, 200);
    }
    app.wait_for_stats("all saved", vouchers[0], |s| s["persisted"] == 7).await;
    for v in &vouchers[1..] {
        app.wait_for_stats("saved", *v, |s| s["persisted"] == 1).await;
    }

    let owned = app;
    let app = &owned;
    let admin = |name: &'static str| move |args: Value| app.admin(name, args);
    let cookie = shopper.cookie.as_str();
    let mine = |args: Value| async move { app.call("my_orders", args, &[("cookie", cookie)]).await.1 };
    for limit in [1, 2, 7] {
        let listed = all_pages(admin("list_vouchers"), json!({}), limit, "id").await;
        assert_eq!(listed, vouchers.iter().rev().copied().collect::<Vec<_>>(), "list_vouchers by {limit}");
        let orders = all_pages(mine, json!({}), limit, "order_id").await;
        assert_eq!(orders.len(), 5, "my_orders by {limit}");
        assert!(newest_first_once(&orders));
        let sold = all_pages(admin("list_orders"), json!({ "voucher_id": vouchers[0] }), limit, "order_id").await;
        assert_eq!(sold.len(), 7, "list_orders by {limit}");
        assert!(newest_first_once(&sold));
        let log = all_pages(admin("list_audit"), json!({ "voucher_id": null }), limit, "id").await;
        assert_eq!(log.len(), 5, "list_audit by {limit}: each voucher made");
        assert!(newest_first_once(&log));
    }
    for (name, args) in [
        ("list_vouchers", json!({ "limit": 0 })),
        ("list_vouchers", json!({ "limit": 101 })),
        ("list_orders", json!({ "voucher_id": vouchers[0], "after": "12x" })),
        ("list_audit", json!({ "limit": 1_001 })),
    ] {
        let (status, body) = app.operator(name, args).await;
        assert_eq!((status.as_u16(), code(&body)), (400, "invalid_input"), "{name}: {body}");
    }
    owned.stop().await;
}
