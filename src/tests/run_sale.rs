//! Running a live sale: pause, resume, end, add and withdraw stock, edit, price; every
//! process follows at once; conservation holds with changes firing beside a storm.

use crate::support::{code, wait_until, Options, Shopper, TestApp, SETTLED, SOON};
use futures::{stream, StreamExt};
use serde_json::{json, Value};
use std::{
    sync::{
        atomic::{AtomicBool, AtomicI64, Ordering},
        Arc,
    },
    time::Duration,
};

/// Three processes on one database and one Redis, whose sold-out flags would refuse
/// for ten minutes unless something clears them.
async fn three_processes() -> (TestApp, TestApp, TestApp) {
    let long_flags = |o: Options| o.with(|c| c.sold_out_ttl_ms = 600_000);
    let a = TestApp::with(long_flags(Options::default())).await;
    let b = TestApp::with(long_flags(a.restart_options())).await;
    let c = TestApp::with(long_flags(a.restart_options())).await;
    (a, b, c)
}

async fn operator_ok(app: &TestApp, name: &str, body: Value) -> Value {
    let (status, answer) = app.operator(name, body).await;
    assert_eq!(status, 200, "{name}: {answer}");
    answer
}

/// The audit actions recorded for a voucher, oldest first.
async fn logged(app: &TestApp, v: i64) -> Vec<String> {
    let entries = operator_ok(app, "list_audit", json!({ "voucher_id": v })).await;
    let mut actions: Vec<String> =
        entries["items"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap().to_owned()).collect();
    actions.reverse();
    actions
}

/// A paused sale whose window Redis lost still reads paused in `sale_stats` (and so on
/// the dashboard and in the shop's feed), as the database says. Before, the sampling
/// script answered 0 for a missing window, which read as "not paused", and the shop's
/// card opened until something rebuilt the sale (the review of 2026-11-29).
#[tokio::test]
async fn a_paused_sale_whose_window_redis_lost_still_reads_paused() {
    // No worker and no upkeep: nothing rebuilds the window meanwhile.
    let app = TestApp::with(Options::default().with(|c| (c.worker, c.sweep_ms) = (false, 3_600_000))).await;
    let v = app.create_voucher(10, -5, 3600).await;
    operator_ok(&app, "pause_sale", json!({ "voucher_id": v })).await;
    assert_eq!(app.stats(v).await["paused"], true);
    let () = redis::AsyncCommands::del(&mut app.redis.clone(), &app.keys(v).window).await.unwrap();
    let stats = app.stats(v).await;
    assert_eq!(stats["paused"], true, "{stats}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_refuses_grabs_on_every_process_the_moment_it_returns() {
    let (a, b, c) = three_processes().await;
    let v = a.create_voucher(10, -5, 3600).await;
    let shoppers = a.sign_in_many("pause", 4).await;

    let paused = operator_ok(&a, "pause_sale", json!({ "voucher_id": v })).await;
    assert_eq!(paused["paused"], true);
    for (app, who) in [(&a, &shoppers[0]), (&b, &shoppers[1]), (&c, &shoppers[2])] {
        let (status, body) = app.grab(who, v).await;
        assert_eq!((status.as_u16(), code(&body)), (409, "sale_paused"), "{body}");
        assert!(body["message"].as_str().unwrap().contains("paused"));
    }
    let listed = b.call("list_vouchers", json!({}), &[]).await.1;
    let mine = listed["items"].as_array().unwrap().iter().find(|x| x["id"] == v).unwrap().clone();
    assert_eq!(mine["paused"], true, "the shop lists it as paused");

    operator_ok(&b, "resume_sale", json!({ "voucher_id": v })).await;
    let (status, body) = c.grab(&shoppers[3], v).await;
    assert_eq!(status, 200, "resumed on every process: {body}");
    assert_eq!(logged(&a, v).await, ["create_voucher", "pause_sale", "resume_sale"]);
    for app in [a, b, c] {
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_stock_reopens_a_sold_out_sale_on_every_process() {
    let (a, b, c) = three_processes().await;
    let v = a.create_voucher(1, -5, 3600).await;
    let shoppers = a.sign_in_many("reopen", 5).await;
    assert_eq!(a.grab(&shoppers[0], v).await.0, 200);
    // Each process hears sold out (its flag would refuse for ten minutes).
    for (app, who) in [(&b, &shoppers[1]), (&c, &shoppers[2])] {
        let (status, body) = app.grab(who, v).await;
        assert_eq!((status.as_u16(), code(&body)), (409, "sold_out"));
    }

    let added = operator_ok(&a, "add_stock", json!({ "voucher_id": v, "units": 2 })).await;
    assert_eq!((added["units"].as_i64(), added["voucher"]["stock"].as_i64()), (Some(2), Some(3)));
    assert_eq!(added["voucher"]["remaining"], 2);
    // Every process's flag clears: each grants again, well within the flags' ten minutes.
    for (app, who) in [(&b, &shoppers[3]), (&c, &shoppers[4])] {
        let granted = || async { app.grab(who, v).await.0 == 200 };
        wait_until("the sold-out flag is cleared", SOON, granted).await;
    }
    let stats = a.wait_for_stats("all persisted", v, |s| s["persisted"] == 3 && s["pending"] == 0).await;
    assert_eq!((stats["total_stock"].as_i64(), stats["redis_stock"].as_i64()), (Some(3), Some(0)));
    assert_eq!(logged(&a, v).await, ["create_voucher", "add_stock"]);
    for app in [a, b, c] {
        app.stop().await;
    }
}

/// A process that missed a change's event (here: units put back in Redis by hand, no
/// event sent) still follows it, because it reads the sale-change count: its sold-out
/// flag, good for ten minutes, is dropped as soon as the count moves.
#[tokio::test]
async fn a_process_that_missed_the_event_follows_the_sale_change_count() {
    // The sale made before the others start: b's first read of the count is after the
    // creation's step, so no late read of that step drops b's flag below (on a loaded
    // machine one did, and the flag's refusal was not seen).
    let long_flags = |o: Options| o.with(|c| c.sold_out_ttl_ms = 600_000);
    let a = TestApp::with(long_flags(Options::default())).await;
    let v = a.create_voucher(1, -5, 3600).await;
    let b = TestApp::with(long_flags(a.restart_options())).await;
    let c = TestApp::with(long_flags(a.restart_options())).await;
    let shoppers = a.sign_in_many("missed", 3).await;
    assert_eq!(a.grab(&shoppers[0], v).await.0, 200);
    assert_eq!(code(&b.grab(&shoppers[1], v).await.1), "sold_out", "b's flag is set");
    let mut redis = a.redis.clone();
    let () = redis::AsyncCommands::incr(&mut redis, a.keys(v).left, 1).await.unwrap();
    let (status, body) = b.grab(&shoppers[1], v).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "sold_out"), "the flag still refuses without asking Redis");

    let changes = seckill::testing::sale_changes(&a.namespace);
    let _: i64 = redis::AsyncCommands::incr(&mut redis, changes, 1).await.unwrap();
    wait_until("b follows the count", SOON, || async { b.grab(&shoppers[1], v).await.0 == 200 }).await;
    for app in [a, b, c] {
        app.stop().await;
    }
}

/// Stock changes whose caller died after the database step are finished by the upkeep
/// of any process, once: an addition Redis never heard of (and, on a second voucher,
/// one that a rebuild of the voucher already counted), and a withdrawal.
#[tokio::test]
async fn stock_changes_a_crash_left_half_done_are_finished_once() {
    let app = TestApp::spawn().await;
    let (v, lost) = (app.create_voucher(5, -5, 3600).await, app.create_voucher(5, -5, 3600).await);
    let backend = app.backend();
    use seckill::testing::ledger;
    ledger::add_stock(&backend.db, v, 3, 1_000_000).await.unwrap().unwrap();
    ledger::owe_withdrawal(&backend.db, v, 2).await.unwrap().unwrap();
    // Redis loses the second voucher before its addition reached it: the rebuild reads
    // the addition from the database and must not be given it again.
    ledger::add_stock(&backend.db, lost, 4, 1_000_000).await.unwrap().unwrap();
    let mut redis = app.redis.clone();
    let () = redis::AsyncCommands::del(&mut redis, app.keys(lost).left).await.unwrap();
    let who = app.sign_in("half-done").await;
    // The first grab finds the voucher gone and rebuilds it (answering "try again").
    wait_until("a grab after the rebuild", SOON, || async { app.grab(&who, lost).await.0 == 200 }).await;

    let owed = || async {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM stock_changes WHERE applied IS NULL")
            .fetch_one(&app.db)
            .await
            .unwrap();
        n == 0
    };
    wait_until("every owed change finished", SETTLED, owed).await;
    let stats = app.stats(v).await;
    assert_eq!((stats["total_stock"].as_i64(), stats["redis_stock"].as_i64()), (Some(6), Some(6)), "{stats}");
    let stats = app.wait_for_stats("persisted", lost, |s| s["persisted"] == 1).await;
    assert_eq!((stats["total_stock"].as_i64(), stats["redis_stock"].as_i64()), (Some(9), Some(8)), "{stats}");
    app.stop().await;
}

/// Owed stock changes that keep failing (here a hundred of one sale whose window Redis
/// holds in a newer layout, so its script refuses each) hold up no other sale's owed
/// change: it is made within a few rounds. Before, each round read the hundred oldest
/// owed changes and tried them one after another, and a hundred that kept failing were
/// all any round reached (a review, 2026-12-02).
#[tokio::test]
async fn owed_stock_changes_that_keep_failing_hold_up_no_other_sales() {
    let app = TestApp::spawn().await;
    let (stuck, other) = (app.create_voucher(5, -5, 3600).await, app.create_voucher(5, -5, 3600).await);
    let mut redis = app.redis.clone();
    let () = redis::AsyncCommands::hset(&mut redis, app.keys(stuck).window, "layout", 99).await.unwrap();
    let owed = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) \
                INSERT INTO stock_changes (voucher_id, units, created_at) SELECT $1, 1, 0 FROM n";
    sqlx::query(owed).bind(stuck).execute(&app.db).await.unwrap();
    // The other's addition: its database step made, Redis's left to the upkeep.
    seckill::testing::ledger::add_stock(&app.backend().db, other, 3, 1_000_000).await.unwrap().unwrap();
    wait_until("the other sale's addition made", SETTLED, || async { app.stats(other).await["redis_stock"] == 8 })
        .await;
    app.stop().await;
}

/// A stock change whose caller died after the database step is finished by a process
/// whose clock runs ten minutes slow (review, 2026-11-29): changes are dated, and
/// found abandoned, by the database's clock. Before, the slow process dated the cutoff
/// by its own clock and left the change owed for as long as it was behind (and a
/// fast process's change hid from the others as long as it was ahead): on a sale of
/// one shard, shoppers heard `sold_out` while the database had the units.
#[tokio::test]
async fn a_change_left_half_done_is_finished_by_a_process_whose_clock_is_slow() {
    use crate::support::process::{Process, Shared};
    use seckill::testing::{ledger, FAKETIME};
    // This process's upkeep stays idle: only the slow one may finish the change.
    let app = TestApp::with(Options::default().with(|c| c.sweep_ms = 3_600_000)).await;
    if app.database_url.starts_with("sqlite:") {
        // SQLite's clock is each process's own: processes on one machine share it, and
        // libfaketime would move the slow process's database clock with it. The
        // PostgreSQL pass of `npm test` runs this.
        app.stop().await;
        return;
    }
    assert!(std::path::Path::new(FAKETIME).exists(), "libfaketime is needed: SECKILL_NEED_FAKETIME=1 bash .ci/setup");
    let v = app.create_voucher(5, -5, 3600).await;
    let shared = Shared {
        redis_url: crate::support::redis_url(),
        database_url: app.database_url.clone(),
        namespace: app.namespace.clone(),
    };
    let slow = [("LD_PRELOAD", FAKETIME), ("FAKETIME", "-600s"), ("FAKETIME_DONT_FAKE_MONOTONIC", "1")];
    let slow = Process::start(&shared, &slow).await;
    ledger::add_stock(&app.db, v, 3, 1_000_000).await.unwrap().unwrap();
    wait_until("the slow process finishes the change", SOON, || async {
        app.stats(v).await["redis_stock"].as_i64() == Some(8)
    })
    .await;
    drop(slow);
    app.stop().await;
}

/// A withdrawal Redis made, then lost with the voucher before the database recorded
/// it: the rebuild (from a database that still counts the units) voids it, and the
/// caller's late record of it changes nothing. Stock in Redis and SQL agree.
#[tokio::test]
async fn a_withdrawal_lost_with_the_voucher_is_voided_on_both_sides() {
    let app = TestApp::with(Options::default().with(|c| c.sweep_ms = 3_600_000)).await;
    let v = app.create_voucher(10, -5, 3600).await;
    let backend = app.backend();
    use seckill::testing::ledger;
    let change = ledger::owe_withdrawal(&backend.db, v, 5).await.unwrap().unwrap();
    // Redis's step, as lua/stock.lua makes it; then Redis loses the voucher.
    let keys = app.keys(v);
    let mut redis = app.redis.clone();
    let () = redis::pipe()
        .decr(&keys.left, 5)
        .ignore()
        .hset(&keys.changes, change.id, -5)
        .ignore()
        .query_async(&mut redis)
        .await
        .unwrap();
    let () = redis::AsyncCommands::del(&mut redis, &[&keys.left, &keys.changes]).await.unwrap();
    let who = app.sign_in("voided").await;
    wait_until("a grab after the rebuild", SOON, || async { app.grab(&who, v).await.0 == 200 }).await;

    let recorded = ledger::settle_change(&backend.db, &change, -5).await.unwrap().made;
    assert_eq!(recorded, 0, "the rebuild voided it");
    let stats = app.wait_for_stats("persisted", v, |s| s["persisted"] == 1).await;
    assert_eq!((stats["total_stock"].as_i64(), stats["redis_stock"].as_i64()), (Some(10), Some(9)), "{stats}");
    app.stop().await;
}

/// A window Redis rolled back while it kept the stock (a replica that missed the
/// pause took over, a restart from an older snapshot) is put right by the upkeep of
/// any process: no rebuild would notice, the stock key is there.
#[tokio::test]
async fn a_pause_redis_lost_is_put_back_by_the_upkeep() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, -5, 3600).await;
    operator_ok(&app, "pause_sale", json!({ "voucher_id": v })).await;
    let () = redis::AsyncCommands::hset_multiple(
        &mut app.redis.clone(),
        app.keys(v).window,
        &[("paused", 0), ("version", 1)],
    )
    .await
    .unwrap();
    // Read, not grabbed: a grab while the pause is gone is granted, and its shopper's
    // next grabs hear the order they hold.
    let window = app.keys(v).window;
    wait_until("the pause is back in Redis", SOON, || async {
        let paused: Option<String> =
            redis::AsyncCommands::hget(&mut app.redis.clone(), &window, "paused").await.unwrap();
        paused.as_deref() == Some("1")
    })
    .await;
    let who = app.sign_in("rolled-back").await;
    assert_eq!(code(&app.grab(&who, v).await.1), "sale_paused");
    app.stop().await;
}

/// A withdrawal of every unit Redis counts is recorded when Redis counts more than the
/// database (review, 2026-11-29: a failover that lost writes can leave it so). Before,
/// the database's `stock_left >= 0` refused the record, and the change stayed owed for
/// good, retried every upkeep round. Now the database takes what it has, and both
/// read none left.
#[tokio::test]
async fn a_withdrawal_of_units_only_redis_counted_is_recorded_not_wedged() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(10, -5, 3600).await;
    let mut redis = app.redis.clone();
    let _: i64 = redis::AsyncCommands::incr(&mut redis, app.keys(v).left, 2).await.unwrap();
    let taken = operator_ok(&app, "withdraw_stock", json!({ "voucher_id": v, "units": 12 })).await;
    assert_eq!(taken["units"].as_i64(), Some(12), "what Redis withdrew: {taken}");
    let owed: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM stock_changes WHERE applied IS NULL")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(owed, 0, "nothing left owed");
    let row: (i64, i64) = sqlx::query_as("SELECT stock, stock_left FROM vouchers WHERE id = $1")
        .bind(v)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(row, (0, 0), "the database took the ten it had");
    let stats = app.stats(v).await;
    assert_eq!(stats["redis_stock"].as_i64(), Some(0), "{stats}");
    app.stop().await;
}

#[tokio::test]
async fn a_withdrawal_takes_only_unsold_units_all_or_none() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, -5, 3600).await;
    let shoppers = app.sign_in_many("withdraw", 3).await;
    for who in &shoppers[..2] {
        assert_eq!(app.grab(who, v).await.0, 200);
    }
    let (status, body) = app.operator("withdraw_stock", json!({ "voucher_id": v, "units": 4 })).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "not_enough_stock"));
    let stats = app.wait_for_stats("persisted", v, |s| s["persisted"] == 2).await;
    assert_eq!((stats["total_stock"].as_i64(), stats["redis_stock"].as_i64()), (Some(5), Some(3)), "unchanged");

    let taken = operator_ok(&app, "withdraw_stock", json!({ "voucher_id": v, "units": 3 })).await;
    assert_eq!((taken["units"].as_i64(), taken["voucher"]["stock"].as_i64()), (Some(3), Some(2)));
    let (status, body) = app.grab(&shoppers[2], v).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "sold_out"));
    let row: (i64, i64, i64, i64) =
        sqlx::query_as("SELECT stock, stock_left, added, withdrawn FROM vouchers WHERE id = $1")
            .bind(v)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(row, (2, 0, 0, 3), "the database agrees");
    assert_eq!(logged(&app, v).await, ["create_voucher", "withdraw_stock"], "a refused withdrawal changed nothing");
    app.stop().await;
}

#[tokio::test]
async fn orders_keep_the_price_of_their_grab_and_pay_it() {
    let app = TestApp::spawn().await;
    let now = chrono::Utc::now();
    let body = json!({
        "title": "Priced", "stock": 5, "price": 500, "face_value": 1000,
        "begins_at": (now - chrono::Duration::seconds(5)).to_rfc3339(),
        "ends_at": (now + chrono::Duration::hours(1)).to_rfc3339(),
    });
    let created = operator_ok(&app, "create_voucher", body).await;
    assert_eq!((created["price"].as_i64(), created["face_value"].as_i64()), (Some(500), Some(1000)));
    assert_eq!(created["currency"], "EUR");
    let v = created["id"].as_i64().unwrap();
    let (ann, bob) = (app.sign_in("price-ann").await, app.sign_in("price-bob").await);
    let first = app.grab(&ann, v).await.1["order_id"].as_str().unwrap().to_owned();
    let edited = operator_ok(&app, "update_voucher", json!({ "voucher_id": v, "price": 700 })).await;
    assert_eq!((edited["price"].as_i64(), edited["face_value"].as_i64()), (Some(700), Some(1000)));
    let second = app.grab(&bob, v).await.1["order_id"].as_str().unwrap().to_owned();
    app.wait_for_stats("both persisted", v, |s| s["persisted"] == 2).await;

    for (who, order, price) in [(&ann, &first, 500), (&bob, &second, 700)] {
        let (status, paid) = app.call("pay_order", json!({ "order_id": order }), &[("cookie", &who.cookie)]).await;
        assert_eq!(status, 200, "{paid}");
        assert_eq!((paid["price"].as_i64(), paid["currency"].as_str()), (Some(price), Some("EUR")), "{paid}");
    }
    app.stop().await;
}

#[tokio::test]
async fn an_ended_sale_refuses_at_once_and_its_orders_can_still_be_paid() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, -5, 3600).await;
    let (ann, bob) = (app.sign_in("end-ann").await, app.sign_in("end-bob").await);
    let order = app.grab(&ann, v).await.1["order_id"].as_str().unwrap().to_owned();
    let ended = operator_ok(&app, "end_sale", json!({ "voucher_id": v })).await;
    let (status, body) = app.grab(&bob, v).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "ended"), "{ended}");
    for (call, args) in [
        ("pause_sale", json!({})),
        ("resume_sale", json!({})),
        ("end_sale", json!({})),
        ("update_voucher", json!({ "title": "Later" })),
        ("add_stock", json!({ "units": 1 })),
        ("withdraw_stock", json!({ "units": 1 })),
    ] {
        let (status, body) = app.on_sale(call, v, args).await;
        assert_eq!((status.as_u16(), code(&body)), (409, "ended"), "nothing changes an ended sale: {call}");
    }
    let (status, body) = app.call("grab_token", json!({ "voucher_id": v }), &[("cookie", &bob.cookie)]).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "ended"), "no grab token for an ended sale");

    app.wait_for_stats("persisted", v, |s| s["persisted"] == 1).await;
    let (status, paid) = app.call("pay_order", json!({ "order_id": order }), &[("cookie", &ann.cookie)]).await;
    assert_eq!((status.as_u16(), paid["status"].as_str()), (200, Some("paid")), "{paid}");

    // A sale ended before its start.
    let later = app.create_voucher(5, 3600, 7200).await;
    let ended = operator_ok(&app, "end_sale", json!({ "voucher_id": later })).await;
    assert!(ended["ends_at"].as_str() < Some(chrono::Utc::now().to_rfc3339().as_str()), "{ended}");
    let (status, body) = app.grab(&bob, later).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "ended"));
    app.stop().await;
}

#[tokio::test]
async fn impossible_changes_get_their_own_codes_and_change_nothing() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, -5, 3600).await;
    let later = app.create_voucher(5, 3600, 7200).await;
    let past = (chrono::Utc::now() - chrono::Duration::minutes(1)).to_rfc3339();
    let soon = (chrono::Utc::now() + chrono::Duration::minutes(30)).to_rfc3339();
    let version = |id: i64| {
        let db = app.db.clone();
        async move {
            let row: (i64,) =
                sqlx::query_as("SELECT version FROM vouchers WHERE id = $1").bind(id).fetch_one(&db).await.unwrap();
            row.0
        }
    };
    let before = (version(v).await, version(later).await);
    let cases = [
        ("withdraw_stock", json!({ "voucher_id": v, "units": 6 }), 409, "not_enough_stock"),
        ("withdraw_stock", json!({ "voucher_id": v, "units": 0 }), 400, "invalid_input"),
        ("add_stock", json!({ "voucher_id": v, "units": -1 }), 400, "invalid_input"),
        ("add_stock", json!({ "voucher_id": v, "units": 2_000_000 }), 400, "invalid_input"),
        ("update_voucher", json!({ "voucher_id": v, "ends_at": past }), 400, "invalid_time"),
        ("update_voucher", json!({ "voucher_id": v, "ends_at": "tomorrow" }), 400, "invalid_time"),
        ("update_voucher", json!({ "voucher_id": v, "ends_at": "9999-12-31T23:59:59-05:00" }), 400, "invalid_time"),
        ("update_voucher", json!({ "voucher_id": v, "begins_at": soon }), 409, "sale_started"),
        ("update_voucher", json!({ "voucher_id": v, "price": -1 }), 400, "invalid_price"),
        ("update_voucher", json!({ "voucher_id": v, "price": 500, "face_value": 100 }), 400, "face_value_below_price"),
        ("update_voucher", json!({ "voucher_id": v, "title": " " }), 400, "invalid_input"),
        ("update_voucher", json!({ "voucher_id": later, "begins_at": soon, "ends_at": soon }), 400, "invalid_time"),
        ("update_voucher", json!({ "voucher_id": 987_654, "title": "x" }), 404, "unknown_voucher"),
        ("pause_sale", json!({ "voucher_id": 987_654 }), 404, "unknown_voucher"),
        ("resume_sale", json!({ "voucher_id": 987_654 }), 404, "unknown_voucher"),
        ("end_sale", json!({ "voucher_id": 987_654 }), 404, "unknown_voucher"),
        ("add_stock", json!({ "voucher_id": 987_654, "units": 1 }), 404, "unknown_voucher"),
        ("withdraw_stock", json!({ "voucher_id": 987_654, "units": 1 }), 404, "unknown_voucher"),
    ];
    for (name, body, status, want) in cases {
        let (got, answer) = app.operator(name, body.clone()).await;
        assert_eq!((got.as_u16(), code(&answer)), (status, want), "{name} {body}: {answer}");
    }
    let ann = app.sign_in("not-an-operator").await;
    let (status, body) = app.call("pause_sale", json!({ "voucher_id": v }), &[("cookie", &ann.cookie)]).await;
    assert_eq!((status.as_u16(), code(&body)), (401, "admin_required"));
    assert_eq!((version(v).await, version(later).await), before, "nothing changed");
    assert_eq!(logged(&app, v).await, ["create_voucher"]);

    // Before its start every field may change; after it, the start may not.
    let begins = (chrono::Utc::now() + chrono::Duration::minutes(10)).to_rfc3339();
    let moved =
        operator_ok(&app, "update_voucher", json!({ "voucher_id": later, "begins_at": begins, "title": "Moved" }))
            .await;
    assert_eq!(moved["title"], "Moved");
    let ends = (chrono::Utc::now() + chrono::Duration::hours(3)).to_rfc3339();
    let longer = operator_ok(&app, "update_voucher", json!({ "voucher_id": v, "ends_at": ends })).await;
    assert_eq!(longer["ends_at"].as_str().map(|t| &t[..16]), Some(&ends[..16]));
    app.stop().await;
}

/// A sale whose stock a script changes in a loop (review, 2026-11-30: each addition and
/// withdrawal, refused or not, was a row kept as long as the sale, and every rebuild of
/// the sale sends them all to Redis): past `MOST_STOCK_CHANGES` a change is refused
/// `stock_change_limit` and writes nothing, and the sale sells on.
#[tokio::test]
async fn a_sale_takes_a_bounded_number_of_stock_changes() {
    use seckill::testing::MOST_STOCK_CHANGES;
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, -5, 3600).await;
    // All but one of them made already: withdrawals Redis refused (they changed nothing).
    let made = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $2) \
                INSERT INTO stock_changes (voucher_id, units, applied, created_at) SELECT $1, -1, 0, 0 FROM n";
    sqlx::query(made).bind(v).bind(MOST_STOCK_CHANGES - 1).execute(&app.db).await.unwrap();
    let last = operator_ok(&app, "withdraw_stock", json!({ "voucher_id": v, "units": 1 })).await;
    assert_eq!(last["voucher"]["remaining"], 4, "{last}");
    for name in ["add_stock", "withdraw_stock"] {
        let (status, answer) = app.operator(name, json!({ "voucher_id": v, "units": 1 })).await;
        assert_eq!((status.as_u16(), code(&answer)), (409, "stock_change_limit"), "{name}: {answer}");
    }
    let count = "SELECT COUNT(*) FROM stock_changes WHERE voucher_id = $1";
    let rows: i64 = sqlx::query_scalar(count).bind(v).fetch_one(&app.db).await.unwrap();
    assert_eq!(rows, MOST_STOCK_CHANGES, "a refused change writes no row");
    let shopper = app.sign_in("changed-often").await;
    assert_eq!(app.grab(&shopper, v).await.0, 200);
    app.stop().await;
}

/// The last stock change a sale may take, asked for by many calls at once (the cap was
/// read before the change was written, outside the voucher's lock, so calls at once
/// all passed it): one is made, the others are refused `stock_change_limit`, and the
/// sale ends at the cap exactly.
#[tokio::test]
async fn calls_at_once_make_no_stock_change_past_the_cap() {
    use seckill::testing::MOST_STOCK_CHANGES;
    let app = TestApp::spawn().await;
    let v = app.create_voucher(50, -5, 3600).await;
    let made = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $2) \
                INSERT INTO stock_changes (voucher_id, units, applied, created_at) SELECT $1, -1, 0, 0 FROM n";
    sqlx::query(made).bind(v).bind(MOST_STOCK_CHANGES - 1).execute(&app.db).await.unwrap();
    let call = |i: usize| {
        let name = if i.is_multiple_of(2) { "add_stock" } else { "withdraw_stock" };
        app.operator(name, json!({ "voucher_id": v, "units": 1 }))
    };
    let answers = futures::future::join_all((0..8).map(call)).await;
    let made = answers.iter().filter(|(status, _)| status.is_success()).count();
    for (status, answer) in answers.iter().filter(|(status, _)| !status.is_success()) {
        assert_eq!((status.as_u16(), code(answer)), (409, "stock_change_limit"), "{answer}");
    }
    let count = "SELECT COUNT(*) FROM stock_changes WHERE voucher_id = $1";
    let rows: i64 = sqlx::query_scalar(count).bind(v).fetch_one(&app.db).await.unwrap();
    assert_eq!((made, rows), (1, MOST_STOCK_CHANGES), "one change made, the sale at the cap");
    app.stop().await;
}

/// A start moved later by a change decided before the start but held up past it (an
/// attack, 2026-11-30, held the database's lock over the start: shoppers were granted,
/// then the start moved a minute later, after their orders) is undone and refused
/// `sale_started`: the sale keeps its start, at the gate and in the database.
#[tokio::test]
async fn a_start_move_held_up_past_the_start_is_undone() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, 2, 3600).await;
    let begins = begins_at(&app, v).await;
    let later = (chrono::Utc::now() + chrono::Duration::minutes(1)).to_rfc3339();
    let edit = app.operator("update_voucher", json!({ "voucher_id": v, "begins_at": later }));
    let (status, answer) = held_over_the_start(&app, v, begins, edit).await;
    assert_eq!((status.as_u16(), code(&answer)), (409, "sale_started"), "{answer}");
    assert_eq!(begins_at(&app, v).await, begins, "the database keeps the start");
    let shopper = app.sign_in("on-time").await;
    assert_eq!(app.grab(&shopper, v).await.0, 200, "the gate keeps the start");
    app.stop().await;
}

/// `end_sale` held up past the start (it moves the start earlier, to the end) still
/// ends the sale (a review, 2026-11-30: the undo above took it for a late start move,
/// and the sale ran on).
#[tokio::test]
async fn an_end_held_up_past_the_start_still_ends_the_sale() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, 2, 3600).await;
    let begins = begins_at(&app, v).await;
    let end = app.operator("end_sale", json!({ "voucher_id": v }));
    let (status, answer) = held_over_the_start(&app, v, begins, end).await;
    assert_eq!(status, 200, "{answer}");
    let shopper = app.sign_in("too-late").await;
    let (status, answer) = app.grab(&shopper, v).await;
    assert_eq!((status.as_u16(), code(&answer)), (409, "ended"), "{answer}");
    app.stop().await;
}

/// `end_sale` held up in the database while the gate still grants records the end as
/// made, when it reached Redis (found beside the start moves above, 2026-11-30: the end
/// named the moment it was asked, and the grants made while it was held up came after
/// their sale's end).
#[tokio::test]
async fn an_end_held_up_is_recorded_when_it_was_made() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, -5, 3600).await;
    let gate_now = || async {
        let (_, now) = app.call("server_time", json!({ "voucher_id": v }), &[]).await;
        now["now_ms"].as_i64().unwrap()
    };
    let (shopper, late) = (app.sign_in("while-held").await, app.sign_in("after-the-end").await);
    let asked_at = gate_now().await;
    let mut held = app.db.begin().await.unwrap();
    sqlx::query("UPDATE vouchers SET title = title WHERE id = $1").bind(v).execute(&mut *held).await.unwrap();
    let end = app.operator("end_sale", json!({ "voucher_id": v }));
    let grab_while_held = async {
        // Held up well past the second an end may be held up and still be recorded as
        // asked (the decision follows `asked_at` by milliseconds).
        let held_for = || async { gate_now().await > asked_at + 2_500 };
        wait_until("the end held up for 2.5 s", SETTLED, held_for).await;
        let (status, answer) = app.grab(&shopper, v).await;
        assert_eq!(status, 200, "the gate grants until the end reaches it: {answer}");
        let granted_by = gate_now().await;
        held.commit().await.unwrap();
        granted_by
    };
    let ((status, ended), granted_by) = tokio::join!(end, grab_while_held);
    assert_eq!(status, 200, "{ended}");
    let ends_at: i64 =
        sqlx::query_scalar("SELECT ends_at FROM vouchers WHERE id = $1").bind(v).fetch_one(&app.db).await.unwrap();
    assert!(ends_at >= granted_by, "the end ({ends_at}) comes after the grant (by {granted_by})");
    let answered = chrono::DateTime::parse_from_rfc3339(ended["ends_at"].as_str().unwrap()).unwrap();
    assert_eq!(answered.timestamp_millis(), ends_at, "answered as recorded");
    let (status, answer) = app.grab(&late, v).await;
    assert_eq!((status.as_u16(), code(&answer)), (409, "ended"), "{answer}");
    app.stop().await;
}

/// The sale's start, as the database has it.
async fn begins_at(app: &TestApp, v: i64) -> i64 {
    sqlx::query_scalar("SELECT begins_at FROM vouchers WHERE id = $1").bind(v).fetch_one(&app.db).await.unwrap()
}

/// Runs `call` with the voucher's row locked until the gate's clock has passed
/// `begins`: a change decided before the start, written after it.
async fn held_over_the_start<T>(app: &TestApp, v: i64, begins: i64, call: impl std::future::Future<Output = T>) -> T {
    let mut held = app.db.begin().await.unwrap();
    sqlx::query("UPDATE vouchers SET title = title WHERE id = $1").bind(v).execute(&mut *held).await.unwrap();
    let hold = async {
        wait_until("the gate's clock passes the start", SETTLED, || async {
            let (_, now) = app.call("server_time", json!({ "voucher_id": v }), &[]).await;
            now["now_ms"].as_i64().is_some_and(|now| now > begins)
        })
        .await;
        held.commit().await.unwrap();
    };
    tokio::join!(call, hold).0
}

/// A sale made longer than the window's bounds allow, before they were set (review,
/// 2026-11-30), may still be shortened, its other fields edited; it may not be made
/// longer still.
#[tokio::test]
async fn a_sale_over_the_bounds_made_before_them_can_be_shortened() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, -5, 3600).await;
    let now = chrono::Utc::now();
    let (begun, ends) = (now - chrono::Duration::days(40), now + chrono::Duration::days(20));
    sqlx::query("UPDATE vouchers SET begins_at = $2, ends_at = $3 WHERE id = $1")
        .bind(v)
        .bind(begun.timestamp_millis())
        .bind(ends.timestamp_millis())
        .execute(&app.db)
        .await
        .unwrap();
    let later = (now + chrono::Duration::days(21)).to_rfc3339();
    let (status, answer) = app.operator("update_voucher", json!({ "voucher_id": v, "ends_at": later })).await;
    assert_eq!((status.as_u16(), code(&answer)), (400, "invalid_time"), "made longer: {answer}");
    operator_ok(&app, "update_voucher", json!({ "voucher_id": v, "title": "Renamed" })).await;
    let sooner = (now + chrono::Duration::days(1)).to_rfc3339();
    let edited = operator_ok(&app, "update_voucher", json!({ "voucher_id": v, "ends_at": sooner })).await;
    assert_eq!(edited["ends_at"].as_str().map(|t| &t[..16]), Some(&sooner[..16]));
    app.stop().await;
}

/// What one grab of the storm saw: when it was sent and answered (ms since the start),
/// and its answer.
struct Seen {
    sent: i64,
    answered: i64,
    granted: bool,
}

/// Grabs and operator changes at once, on two processes: add, withdraw, pause and
/// resume fire in a loop while 600 shoppers grab. Afterwards: no grab sent after a
/// pause returned and answered before the next resume was granted; the units add up
/// in Redis and in the database (total = initial + added − withdrawn; Redis stock +
/// granted = total; the database's the same); one order per shopper.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_storm_beside_stock_changes_and_pauses_keeps_every_unit() {
    const INITIAL: i64 = 200;
    let a = TestApp::spawn().await;
    let b = TestApp::with(a.restart_options()).await;
    let v = a.create_voucher(INITIAL, -5, 3600).await;
    let shoppers: Vec<Shopper> = a.sign_in_many("change-storm", 600).await;
    let start = tokio::time::Instant::now();
    let ms = move || start.elapsed().as_millis() as i64;
    let (added, withdrawn) = (Arc::new(AtomicI64::new(0)), Arc::new(AtomicI64::new(0)));
    let storm_over = Arc::new(AtomicBool::new(false));
    // Windows [pause returned, resume sent] in ms.
    let paused_windows = Arc::new(std::sync::Mutex::new(Vec::<(i64, i64)>::new()));
    // The second half of the storm waits for the first pause to be over, so a pause
    // falls inside the storm however fast the grabs go (a busy machine made the
    // operator's first pause come after the last grab once).
    let (first_pause_over, after_first_pause) = tokio::sync::watch::channel(false);

    let operator = {
        let (api, added, withdrawn, over, windows) =
            (b.api.clone(), added.clone(), withdrawn.clone(), storm_over.clone(), paused_windows.clone());
        async move {
            let mut round = 0;
            while !over.load(Ordering::Acquire) {
                round += 1;
                let (status, body) = api.operator("add_stock", json!({ "voucher_id": v, "units": 7 })).await.unwrap();
                assert_eq!(status, 200, "{body}");
                added.fetch_add(7, Ordering::AcqRel);
                let (status, body) =
                    api.operator("withdraw_stock", json!({ "voucher_id": v, "units": 5 })).await.unwrap();
                match (status.as_u16(), code(&body)) {
                    (200, _) => {
                        withdrawn.fetch_add(5, Ordering::AcqRel);
                    }
                    (409, "not_enough_stock") => {}
                    other => panic!("withdraw_stock: {other:?} {body}"),
                }
                if round % 2 == 1 {
                    let (status, body) = api.operator("pause_sale", json!({ "voucher_id": v })).await.unwrap();
                    assert_eq!(status, 200, "{body}");
                    let returned = ms();
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let sent = ms();
                    let (status, body) = api.operator("resume_sale", json!({ "voucher_id": v })).await.unwrap();
                    assert_eq!(status, 200, "{body}");
                    windows.lock().unwrap().push((returned, sent));
                    first_pause_over.send_replace(true);
                }
            }
        }
    };
    let storm = {
        let (apps, over) = ([&a, &b], storm_over.clone());
        async move {
            let half = shoppers.len() / 2;
            let seen: Vec<Seen> = stream::iter(shoppers.iter().enumerate())
                .map(|(i, who)| {
                    let mut after_first_pause = after_first_pause.clone();
                    async move {
                        if i >= half {
                            tokio::time::timeout(Duration::from_secs(30), after_first_pause.wait_for(|over| *over))
                                .await
                                .expect("the operator's first pause ends within 30 s")
                                .unwrap();
                        }
                        let sent = ms();
                        let (status, _) = apps[i % 2].grab(who, v).await;
                        Seen { sent, answered: ms(), granted: status == 200 }
                    }
                })
                .buffer_unordered(32)
                .collect()
                .await;
            over.store(true, Ordering::Release);
            seen
        }
    };
    let (seen, ()) = tokio::join!(storm, operator);

    let windows = paused_windows.lock().unwrap().clone();
    assert!(!windows.is_empty(), "the operator paused during the storm");
    for s in seen.iter().filter(|s| s.granted) {
        let inside = windows.iter().find(|(paused, resumed)| s.sent >= *paused && s.answered <= *resumed);
        assert!(inside.is_none(), "granted while paused: sent {} answered {} in {inside:?}", s.sent, s.answered);
    }
    let granted = seen.iter().filter(|s| s.granted).count() as i64;
    let total = INITIAL + added.load(Ordering::Acquire) - withdrawn.load(Ordering::Acquire);
    let stats = a.wait_for_stats("all persisted", v, |s| s["persisted"] == granted && s["pending"] == 0).await;
    assert_eq!(stats["total_stock"].as_i64(), Some(total), "total = initial + added - withdrawn: {stats}");
    assert_eq!(stats["redis_stock"].as_i64().unwrap() + granted, total, "Redis: stock + granted = total: {stats}");
    assert_eq!(stats["granted"].as_i64(), Some(granted), "{stats}");
    let row: (i64, i64, i64, i64) =
        sqlx::query_as("SELECT stock, stock_left, added, withdrawn FROM vouchers WHERE id = $1")
            .bind(v)
            .fetch_one(&a.db)
            .await
            .unwrap();
    assert_eq!(row.0, total, "SQL total");
    assert_eq!(row.1 + granted, total, "SQL: stock left + orders = total");
    assert_eq!(INITIAL + row.2 - row.3, total, "SQL: added and withdrawn as answered");
    let owed: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM stock_changes WHERE applied IS NULL").fetch_one(&a.db).await.unwrap();
    assert_eq!(owed, 0, "no stock change left owed");
    for app in [a, b] {
        app.stop().await;
    }
}

/// The cap on a sale's units holds for additions sent at once: they are checked in the
/// same statement that makes them, not read first and written after.
#[tokio::test]
async fn additions_sent_at_once_never_pass_the_cap_on_units() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(3, 60, 3600).await;
    // 3 + 4 × 200,000 fit under 1,000,000; a fifth would not.
    let answers = futures::future::join_all(
        (0..8).map(|_| app.operator("add_stock", json!({ "voucher_id": v, "units": 200_000 }))),
    )
    .await;
    let added = answers.iter().filter(|(s, _)| *s == 200).count();
    let refused = answers.iter().filter(|(s, b)| *s == 400 && code(b) == "invalid_input").count();
    assert_eq!((added, refused), (4, 4), "{answers:?}");
    let stock: i64 =
        sqlx::query_scalar("SELECT stock FROM vouchers WHERE id = $1").bind(v).fetch_one(&app.db).await.unwrap();
    assert_eq!(stock, 800_003);
    app.stop().await;
}

/// A withdrawal from a sale Redis lost rebuilds it, and the rebuild voids the
/// withdrawal, as it voids every one it finds owed: nothing is withdrawn, and the
/// operator is told to try again, not that the sale has too few units. Before, it
/// answered `not_enough_stock` with every unit unsold (the attack of 2026-11-29).
#[tokio::test]
async fn a_withdrawal_from_a_sale_redis_lost_asks_to_try_again() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, -5, 3600).await;
    let keys = app.keys(v);
    let () = redis::AsyncCommands::del(&mut app.redis.clone(), &[&keys.left, &keys.window]).await.unwrap();
    let (status, body) = app.operator("withdraw_stock", json!({ "voucher_id": v, "units": 2 })).await;
    assert_eq!((status.as_u16(), code(&body)), (503, "unavailable"), "{body}");
    assert_eq!(app.stats(v).await["redis_stock"], 5, "nothing withdrawn");
    let taken = operator_ok(&app, "withdraw_stock", json!({ "voucher_id": v, "units": 2 })).await;
    assert_eq!(taken["units"], 2, "{taken}");
    assert_eq!(app.stats(v).await["redis_stock"], 3);
    app.stop().await;
}
