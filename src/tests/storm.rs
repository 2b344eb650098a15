//! A storm of concurrent grabs: exactly `stock` orders, one per user, nothing lost.

use crate::support::{code, Shopper, TestApp};
use redis::AsyncCommands;
use std::collections::{HashMap, HashSet};

const USERS: usize = 1_000;
const STOCK: i64 = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn storm_sells_exactly_the_stock_once_per_user() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(STOCK, -5, 3600).await;
    let shoppers: Vec<Shopper> = app.sign_in_many("storm", USERS).await;

    // Every shopper grabs twice, all at once.
    let attempts = shoppers.iter().chain(shoppers.iter());
    let answers = app.grab_all(attempts, v, 200).await;

    let mut refusals: HashMap<String, usize> = HashMap::new();
    let mut winners = HashSet::new();
    let mut order_ids = HashSet::new();
    for (user, status, body) in &answers {
        if *status == 200 {
            assert!(winners.insert(*user), "user {user} was granted twice");
            assert!(order_ids.insert(body["order_id"].as_str().unwrap().to_owned()), "order id reused");
        } else {
            assert_eq!(*status, 409, "{body}");
            *refusals.entry(code(body).to_owned()).or_default() += 1;
        }
    }
    assert_eq!(winners.len() as i64, STOCK, "granted exactly the stock (I1); refusals: {refusals:?}");
    let allowed: HashSet<&str> = ["sold_out", "already_bought"].into();
    assert!(refusals.keys().all(|k| allowed.contains(k.as_str())), "{refusals:?}");

    // Nothing lost (I3): every granted order is persisted, once (I2, I5).
    let stats = app.wait_for_stats("all orders persisted", v, |s| s["persisted"] == STOCK && s["pending"] == 0).await;
    assert_eq!(stats["redis_stock"], 0);
    assert_eq!(stats["granted"], STOCK);
    assert_eq!(stats["dead_letters"], 0);
    // Conservation (I4): stock left + granted = total.
    assert_eq!(stats["redis_stock"].as_i64().unwrap() + stats["granted"].as_i64().unwrap(), STOCK);

    let rows: Vec<(i64, i64)> = sqlx::query_as("SELECT id, user_id FROM orders WHERE voucher_id = $1")
        .bind(v)
        .fetch_all(&app.db)
        .await
        .unwrap();
    let users: HashSet<i64> = rows.iter().map(|r| r.1).collect();
    assert_eq!(users, winners, "the persisted buyers are exactly the granted ones");
    let ids: HashSet<String> = rows.iter().map(|r| r.0.to_string()).collect();
    assert_eq!(ids, order_ids, "persisted order ids are the ones handed out");
    let left: i64 =
        sqlx::query_scalar("SELECT stock_left FROM vouchers WHERE id = $1").bind(v).fetch_one(&app.db).await.unwrap();
    assert_eq!(left, 0);

    let mut redis = app.redis.clone();
    let results: HashMap<String, String> = redis.hgetall(app.keys(v).results).await.unwrap();
    assert_eq!(results.len() as i64, STOCK);
    assert!(results.values().all(|r| r.starts_with("success:")), "{results:?}");
    app.stop().await;
}
