//! Warm-up never resurrects sold stock, and rebuilds a voucher Redis lost.

use crate::support::{code, Options, TestApp};
use redis::AsyncCommands;
use seckill::server::{local_redis::LocalRedis, ServeError};
use serde_json::json;

#[tokio::test]
async fn warm_up_keeps_sold_stock_and_rebuilds_lost_state() {
    // No worker yet: Redis has sold 3 units the database does not know of.
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let v = app.create_voucher(10, -5, 3600).await;
    let mut buyers = Vec::new();
    for name in ["w1", "w2", "w3"] {
        let s = app.sign_in(name).await;
        assert_eq!(app.grab(&s, v).await.0, 200);
        buyers.push(s);
    }
    let left: i64 =
        sqlx::query_scalar("SELECT stock_left FROM vouchers WHERE id = $1").bind(v).fetch_one(&app.db).await.unwrap();
    assert_eq!(left, 10, "the database has not seen the sales yet");
    // Warming again changes nothing: the 3 sold units stay sold.
    let warmed = app.admin("warm_up", json!({ "voucher_id": v })).await;
    assert_eq!(warmed["remaining"], 7);
    assert_eq!(app.stats(v).await["redis_stock"], 7);

    let opts = app.restart_options();
    app.stop().await;
    let app = TestApp::with(opts).await;
    app.wait_for_stats("3 persisted", v, |s| s["persisted"] == 3 && s["pending"] == 0).await;

    // Redis loses the voucher: the next grab finds it gone, rebuilds stock and buyers
    // from the database and asks the shopper to try again (not "no such sale").
    let keys = app.keys(v);
    let mut redis = app.redis.clone();
    let _: () = redis.del(&[&keys.left, &keys.buyers, &keys.window]).await.unwrap();
    let (status, body) = app.grab(&buyers[0], v).await;
    assert_eq!((status.as_u16(), code(&body)), (503, "unavailable"), "{body}");
    let warmed = app.admin("warm_up", json!({ "voucher_id": v })).await;
    assert_eq!(warmed["remaining"], 7, "already rebuilt: warming again changes nothing");
    let stats = app.stats(v).await;
    assert_eq!((stats["redis_stock"].as_i64(), stats["granted"].as_i64()), (Some(7), Some(3)));
    let (status, body) = app.grab(&buyers[0], v).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "already_bought"));
    let newcomer = app.sign_in("w4").await;
    assert_eq!(app.grab(&newcomer, v).await.0, 200);
    app.stop().await;
}

#[tokio::test]
async fn a_worker_rebuilds_a_voucher_whose_group_redis_lost() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, -5, 3600).await;
    let first = app.sign_in("g1").await;
    assert_eq!(app.grab(&first, v).await.0, 200);
    app.wait_for_stats("1 persisted", v, |s| s["persisted"] == 1 && s["pending"] == 0).await;

    // Redis forgets everything about the voucher (a restart without persistence).
    let keys = app.keys(v);
    let mut redis = app.redis.clone();
    let _: () = redis.del(&[&keys.left, &keys.buyers, &keys.window, &keys.orders, &keys.results]).await.unwrap();
    // The worker notices the missing group and warms the voucher again by itself.
    let stats = app.wait_for_stats("rebuilt", v, |s| s["redis_stock"] == 4).await;
    assert_eq!(stats["granted"], 1);
    let (status, body) = app.grab(&first, v).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "already_bought"));
    let second = app.sign_in("g2").await;
    assert_eq!(app.grab(&second, v).await.0, 200);
    app.wait_for_stats("2 persisted", v, |s| s["persisted"] == 2 && s["pending"] == 0).await;
    app.stop().await;
}

/// A grab of a voucher Redis does not hold asks the database: no such voucher is 404,
/// and a sale whose keys went with its end is `ended`, not "no such sale".
#[tokio::test]
async fn a_grab_redis_cannot_place_is_told_what_the_database_knows() {
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let v = app.create_voucher(5, -5, 3600).await;
    let ann = app.sign_in("placed-ann").await;
    let (status, body) = app.grab(&ann, 987_654).await;
    assert_eq!((status.as_u16(), code(&body)), (404, "unknown_voucher"));

    // The sale ended and its keys expired (here: deleted).
    let now = chrono::Utc::now().timestamp_millis();
    sqlx::query("UPDATE vouchers SET begins_at = $1, ends_at = $2 WHERE id = $3")
        .bind(now - 60_000)
        .bind(now - 1_000)
        .bind(v)
        .execute(&app.db)
        .await
        .unwrap();
    let keys = app.keys(v);
    let mut redis = app.redis.clone();
    let _: () = redis.del(&[&keys.left, &keys.buyers, &keys.window]).await.unwrap();
    let (status, body) = app.grab(&ann, v).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "ended"));
    let exists: bool = redis.exists(&keys.left).await.unwrap();
    assert!(!exists, "an ended sale is not rebuilt");
    app.stop().await;
}

#[tokio::test]
async fn restart_warms_without_resetting_stock() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, -5, 3600).await;
    let s = app.sign_in("r1").await;
    assert_eq!(app.grab(&s, v).await.0, 200);
    let opts = app.restart_options();
    app.stop().await;
    let again = TestApp::with(opts).await;
    let stats = again.wait_for_stats("persisted after restart", v, |s| s["persisted"] == 1).await;
    assert_eq!(stats["redis_stock"], 4);
    again.stop().await;
}

/// Redis does not grow forever: every key of a sale expires its drain grace after the
/// sale ends, the ones scripts create later too, and the order id counter of a day
/// after two days.
#[tokio::test]
async fn a_sales_keys_expire_after_the_drain_grace() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, -5, 3600).await;
    let ann = app.sign_in("ann").await;
    assert_eq!(app.grab(&ann, v).await.0, 200);
    assert_eq!(app.grab(&ann, v).await.0, 409, "a refusal creates the refusals counter");
    app.wait_for_stats("persisted", v, |s| s["persisted"] == 1).await;

    let grace_ms = seckill::testing::DRAIN_GRACE_MS;
    let keys = app.keys(v);
    let mut redis = app.redis.clone();
    for key in [&keys.left, &keys.buyers, &keys.window, &keys.orders, &keys.results, &keys.refused] {
        let ttl: i64 = redis.pttl(key).await.unwrap();
        let expected = 3600 * 1000 + grace_ms;
        assert!((expected - 60_000..=expected).contains(&ttl), "{key} expires in {ttl} ms, not about {expected}");
    }
    let counters: Vec<String> = redis.keys(format!("{}:icr:order:*", app.namespace)).await.unwrap();
    assert_eq!(counters.len(), 1);
    let ttl: i64 = redis.ttl(&counters[0]).await.unwrap();
    assert!((1..=2 * 24 * 3600).contains(&ttl), "the day's id counter expires: {ttl}");
    app.stop().await;
}

/// Redis loses part of a sale's keys: the order stream, with three granted orders in
/// it that no worker had read. Before, the stock key's presence read as "nothing
/// lost": the group was made again on an empty stream, the three results stayed
/// `queued` for ever and their shoppers were refused `already_bought`. Now any key of
/// the sale missing means the voucher is rebuilt from the database: the three grabs
/// read `failed: lost`, their shoppers may grab again, and stock + buyers = total.
#[tokio::test]
async fn a_sale_that_lost_its_order_stream_is_rebuilt_whole() {
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let v = app.create_voucher(5, -5, 3600).await;
    let shoppers = app.sign_in_many("streamless", 3).await;
    let mut orders = Vec::new();
    for s in &shoppers {
        let (status, body) = app.grab(s, v).await;
        assert_eq!(status, 200, "{body}");
        orders.push((body["order_id"].clone(), body["receipt"].clone()));
    }
    let keys = app.keys(v);
    let _: () = app.redis.clone().del(&keys.orders).await.unwrap();
    // A worker starts: it finds no group, and warms the voucher again.
    let opts = app.restart_options();
    app.stop().await;
    let app = TestApp::with(opts).await;
    let stats = app.wait_for_stats("rebuilt", v, |s| s["redis_stock"] == 5).await;
    assert_eq!(stats["persisted"], 0, "{stats}");
    for (s, (order_id, receipt)) in shoppers.iter().zip(&orders) {
        let cookie = [("cookie", s.cookie.as_str())];
        let ask = json!({ "voucher_id": v, "order_id": order_id, "receipt": receipt });
        let (status, body) = app.call("grab_result", ask, &cookie).await;
        assert_eq!(
            (status.as_u16(), body["status"].as_str(), body["reason"].as_str()),
            (200, Some("failed"), Some("lost"))
        );
        let (status, body) = app.grab(s, v).await;
        assert_eq!(status, 200, "may grab again: {body}");
    }
    app.wait_for_stats("the new grabs persisted", v, |s| s["persisted"] == 3 && s["redis_stock"] == 2).await;
    let buyers: i64 = app.redis.clone().hlen(&keys.buyers).await.unwrap();
    assert_eq!(buyers, 3, "stock + buyers = total");
    app.stop().await;
}

/// A Redis that may evict keys (a `maxmemory` limit with `volatile-lru`, the large
/// managed services' default) could take one key of a sale and leave the rest: the
/// app refuses to start on it and says what to set; with `noeviction` it starts.
#[tokio::test]
async fn a_redis_that_may_evict_a_sales_keys_is_refused() {
    let dir = tempfile::TempDir::new().unwrap();
    let private = LocalRedis::start(dir.path()).await.unwrap();
    let mut redis = seckill::testing::RedisConn::open(&private.url).await.unwrap();
    for (name, value) in [("maxmemory", "1gb"), ("maxmemory-policy", "volatile-lru")] {
        let () = redis::cmd("CONFIG").arg("SET").arg(name).arg(value).query_async(&mut redis).await.unwrap();
    }
    let mut config = Options::default().config;
    config.redis_url = Some(private.url.clone());
    config.database_url = crate::support::fresh_database(dir.path()).await;
    let leptos = leptos::config::LeptosOptions::builder().output_name("seckill").site_root("target/site").build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    match seckill::server::serve(config, leptos, listener, std::future::pending()).await {
        Err(ServeError::Config(why)) => {
            assert!(
                why.contains("maxmemory-policy volatile-lru") && why.contains("set maxmemory-policy noeviction"),
                "{why}"
            )
        }
        other => panic!("started on an evicting Redis: {other:?}"),
    }
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("noeviction")
        .query_async(&mut redis)
        .await
        .unwrap();
    let app = TestApp::with(Options::default().with(|c| c.redis_url = Some(private.url.clone()))).await;
    app.stop().await;
    private.stop().await;
}

/// Deletes the rows of every sale from `first` on, as a backup taken before `first`
/// was made lacks them (and the orders and figures that refer to them).
async fn forget_sales_from(db: &seckill::testing::Db, first: i64) {
    for table in ["orders", "sale_refusals", "sale_latency", "vouchers"] {
        let column = if table == "vouchers" { "id" } else { "voucher_id" };
        sqlx::query(&format!("DELETE FROM {table} WHERE {column} >= $1")).bind(first).execute(db).await.unwrap();
    }
}

/// Stops `app` and takes its database back to a backup taken before sale `first` was
/// made: the rows of `first` and of every sale after it gone, and the database's count
/// of ids set back, so that it hands `first` out again. Redis keeps its keys.
async fn restore_to_before(app: TestApp, first: i64) -> Options {
    let (options, db) = (app.restart_options(), app.db.clone());
    app.stop().await;
    forget_sales_from(&db, first).await;
    let reset = if options.reuse.as_ref().is_some_and(|r| r.database_url.starts_with("postgres")) {
        format!("ALTER TABLE vouchers ALTER COLUMN id RESTART WITH {first}")
    } else {
        format!("UPDATE sqlite_sequence SET seq = {} WHERE name = 'vouchers'", first - 1)
    };
    sqlx::raw_sql(&reset).execute(&db).await.unwrap();
    options
}

/// Deletes every key of sale `id` in Redis (what its expiry, a day after its end, does).
async fn delete_sale_keys(redis: &mut seckill::testing::RedisConn, namespace: &str, id: i64) {
    let k = seckill::testing::SaleKeys::new(namespace, id);
    let keys = [k.left, k.buyers, k.window, k.orders, k.results, k.dlq, k.refused, k.given_back, k.changes, k.rebuild];
    let () = redis.del(&keys).await.unwrap();
}

/// What a start refused with.
async fn refused_with(options: &Options) -> String {
    match TestApp::starting(options.clone()).await.refused().await {
        ServeError::Config(why) => why,
        other => panic!("refused for another reason: {other:?}"),
    }
}

/// A database restored from a backup older than Redis's keys: the sale it makes next
/// would take over the one Redis holds under that id (its stock and buyers, and any
/// order granted and never saved, which the worker would save as the new sale's). The
/// app refuses to start on it, naming the sale and the namespace; with the
/// namespace's keys gone (the restore's procedure), it starts, and its next sale
/// starts afresh.
#[tokio::test]
async fn a_database_older_than_redis_is_refused_at_start() {
    let app = TestApp::spawn().await;
    app.create_voucher(5, -5, 3600).await;
    let later = app.create_voucher(5, -5, 3600).await;
    let shopper = app.sign_in("before-the-backup").await;
    assert_eq!(app.grab(&shopper, later).await.0, 200);
    app.wait_for_stats("the order saved", later, |s| s["persisted"] == 1).await;
    let (namespace, mut redis) = (app.namespace.clone(), app.redis.clone());
    // The backup was taken before `later` was made.
    let options = restore_to_before(app, later).await;

    let why = refused_with(&options).await;
    assert!(why.contains(&format!("Redis has held sale {later}")) && why.contains(&namespace), "{why}");
    // The procedure: every key of the namespace deleted (here the sale's and the mark).
    delete_sale_keys(&mut redis, &namespace, later).await;
    let () = redis.del(seckill::testing::last_sale(&namespace)).await.unwrap();
    let app = TestApp::with(options).await;
    let again = app.create_voucher(5, -5, 3600).await;
    assert_eq!(again, later, "the id is handed out again");
    let stats = app.api.stats(again).await.unwrap();
    assert_eq!((stats["redis_stock"].as_i64(), stats["granted"].as_i64()), (Some(5), Some(0)), "{stats}");
    assert_eq!(app.grab(&shopper, again).await.0, 200, "its earlier buyer is no buyer of the new sale");
}

/// A backup weeks old: the newest sales' keys expired since, but an older sale made
/// after the backup still has its keys, past the few next ids a start looks at (a
/// start once found nothing there, and started). Redis's mark of the sales it loaded
/// outlives their keys: the start is refused. A voucher deleted by hand is no
/// restore: the database's count of ids does not go back, and the start goes on.
#[tokio::test]
async fn a_database_older_than_the_sales_redis_still_holds_is_refused_at_start() {
    let app = TestApp::spawn().await;
    let kept = app.create_voucher(5, -5, 3600).await;
    let mut made_after = Vec::new();
    for _ in 0..6 {
        made_after.push(app.create_voucher(5, -5, 3600).await);
    }
    let newest = app.create_voucher(5, -5, 3600).await;
    forget_sales_from(&app.db, newest).await;
    let (namespace, mut redis, options) = (app.namespace.clone(), app.redis.clone(), app.restart_options());
    app.stop().await;
    let app = TestApp::with(options).await;
    assert_eq!(app.create_voucher(5, -5, 3600).await, newest + 1, "the deleted sale's id is not handed out again");

    // The backup was taken before `made_after`; the keys of all but the newest of
    // them expired since, and so did the newer sales'.
    let options = restore_to_before(app, kept + 1).await;
    let (&held, expired) = made_after.split_last().unwrap();
    for &id in expired.iter().chain(&[newest, newest + 1]) {
        delete_sale_keys(&mut redis, &namespace, id).await;
    }
    assert!(held > kept + 4, "the sale left in Redis is past the ids a start looks at: {held}");
    let why = refused_with(&options).await;
    assert!(why.contains(&format!("Redis has held sale {}", newest + 1)) && why.contains(&namespace), "{why}");
}
