//! Every outcome of the gate, through the public API.

use crate::support::{code, Options, TestApp, SETTLED, SOON};
use redis::AsyncCommands;
use seckill::{
    error::ErrorCode,
    testing::{gate, warm, RebuildSource, Verdict, VoucherRow},
};
use serde_json::json;

#[tokio::test]
async fn grab_outcomes_through_the_api() {
    let app = TestApp::spawn().await;
    let ann = app.sign_in("ann").await;
    let bob = app.sign_in("bob").await;
    let cid = app.sign_in("cid").await;
    let one = app.create_voucher(2, -5, 3600).await;

    let (status, body) = app.grab(&ann, one).await;
    assert_eq!(status, 200, "{body}");
    let order_id = body["order_id"].as_str().expect("order id is a string");
    assert!(order_id.parse::<i64>().unwrap() > 0);
    assert_eq!(body["status"], "queued");

    let (status, again) = app.grab(&ann, one).await;
    assert_eq!((status.as_u16(), code(&again)), (409, "already_bought"));
    assert_eq!(again["order_id"].as_str(), Some(order_id), "a grab sent again learns the order it holds");
    assert_eq!(app.grab(&bob, one).await.0, 200, "the last unit");
    let (status, body) = app.grab(&cid, one).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "sold_out"));

    let later = app.create_voucher(5, 3600, 7200).await;
    let (status, body) = app.grab(&bob, later).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "not_started"));

    let (status, body) = app.grab(&bob, 987_654).await;
    assert_eq!((status.as_u16(), code(&body)), (404, "unknown_voucher"));
    // Asked at once, the one database lookup answers them all the same.
    let made_up = app.grab_all([&ann, &bob, &cid].repeat(8).into_iter(), 987_655, 24).await;
    for (_, status, body) in made_up {
        assert_eq!((status, code(&body)), (404, "unknown_voucher"), "{body}");
    }

    let (status, body) = app.call("grab", json!({ "voucher_id": one }), &[]).await;
    assert_eq!((status.as_u16(), code(&body)), (401, "not_signed_in"));
    app.stop().await;
}

/// A buyer asking again once the sale is paused, or over, is told the order they hold
/// (their grab's answer was lost, and the page sent it again): not `sale_paused` or
/// `ended`, which says they have nothing. Before, the gate checked the window first.
#[tokio::test]
async fn a_buyer_asking_again_after_a_pause_or_the_end_hears_their_order() {
    let app = TestApp::spawn().await;
    let (ann, bob) = (app.sign_in("held-ann").await, app.sign_in("held-bob").await);
    let v = app.create_voucher(5, -5, 3600).await;
    let (status, body) = app.grab(&ann, v).await;
    assert_eq!(status, 200, "{body}");
    let held = body["order_id"].clone();
    for (change, refusal) in [("pause_sale", "sale_paused"), ("end_sale", "ended")] {
        app.admin(change, json!({ "voucher_id": v })).await;
        let (status, again) = app.grab(&ann, v).await;
        assert_eq!((status.as_u16(), code(&again)), (409, "already_bought"), "after {change}: {again}");
        assert_eq!(again["order_id"], held, "after {change}: {again}");
        let (status, body) = app.grab(&bob, v).await;
        assert_eq!((status.as_u16(), code(&body)), (409, refusal), "a shopper holding nothing: {body}");
    }
    app.stop().await;
}

/// A grab sent `again` (the page's retry of a grab whose answer was lost) is asked of
/// the gate past this process's sold-out flag: a buyer whose grant took the last unit
/// hears `already_bought`, with the order and its receipt. Before, the flag answered
/// `sold_out` and hid the order. A first try still hears the flag.
#[tokio::test]
async fn a_grab_sent_again_passes_the_sold_out_flag_and_hears_its_order() {
    let app = TestApp::with(Options::default().with(|c| c.sold_out_ttl_ms = 600_000)).await;
    let (ann, bob) = (app.sign_in("again-ann").await, app.sign_in("again-bob").await);
    let v = app.create_voucher(1, -5, 3600).await;
    let (status, first) = app.grab(&ann, v).await;
    assert_eq!(status, 200, "{first}");
    // Refused by the gate or by the flag: either way the flag is up from here on.
    let (status, body) = app.grab(&bob, v).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "sold_out"), "{body}");
    let cookie = [("cookie", ann.cookie.as_str())];
    let (status, body) = app.call("grab", json!({ "voucher_id": v }), &cookie).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "sold_out"), "a first try hears the flag: {body}");
    let (status, body) = app.call("grab", json!({ "voucher_id": v, "again": true }), &cookie).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "already_bought"), "{body}");
    assert_eq!((&body["order_id"], &body["receipt"]), (&first["order_id"], &first["receipt"]), "{body}");
    app.stop().await;
}

/// Only grants use up the day's order id counter (32 bits a day), and a second's
/// refusals: a refused grab hands its id's value back, taken again in a later second
/// (another id), so refusals asked again and again (here, before the start) cannot
/// run the counter out and stop every sale until midnight.
#[tokio::test]
async fn refused_grabs_use_up_no_order_ids() {
    let app = TestApp::with(Options::default().with(|c| c.id_block = 2)).await;
    let names: Vec<String> = (0..10).map(|i| format!("early{i}")).collect();
    let shoppers = futures::future::join_all(names.iter().map(|name| app.sign_in(name))).await;
    let later = app.create_voucher(5, 3600, 7200).await;
    let counter = || async {
        let day = chrono::Utc::now().format("%Y%m%d").to_string();
        let value: u64 = app.redis.clone().get(format!("{}:icr:order:{day}", app.namespace)).await.unwrap();
        (day, value)
    };
    // One at a time: grabs in flight together each hold an id of their own.
    let refuse_thirty = || async {
        for s in shoppers.iter().cycle().take(30) {
            assert_eq!(code(&app.grab(s, later).await.1), "not_started");
        }
    };
    // Tried again should a UTC midnight fall between the two reads (each day has its counter).
    for _ in 0..3 {
        assert_eq!(code(&app.grab(&shoppers[0], later).await.1), "not_started");
        let before = counter().await;
        refuse_thirty().await;
        let second = chrono::Utc::now().timestamp();
        crate::support::wait_until("the next second", SOON, || async { chrono::Utc::now().timestamp() > second }).await;
        refuse_thirty().await;
        let after = counter().await;
        if before.0 == after.0 {
            // The first thirty's, and the refill they started (blocks of 2): the next
            // thirty took theirs again.
            assert!(after.1 - before.1 <= 34, "60 refused grabs took {} ids", after.1 - before.1);
            return app.stop().await;
        }
    }
    panic!("three midnights in a row");
}

#[tokio::test]
async fn result_moves_from_queued_to_success_and_is_private() {
    let app = TestApp::spawn().await;
    let ann = app.sign_in("ann").await;
    let eve = app.sign_in("eve").await;
    let v = app.create_voucher(3, -5, 3600).await;
    let (_, ticket) = app.grab(&ann, v).await;
    let order_id = ticket["order_id"].as_str().unwrap().to_owned();
    let ask = |who: &crate::support::Shopper| {
        let cookie = who.cookie.clone();
        let order_id = order_id.clone();
        let app = &app;
        async move {
            app.call("grab_result", json!({ "voucher_id": v, "order_id": order_id }), &[("cookie", &cookie)]).await
        }
    };
    let deadline = tokio::time::Instant::now() + SETTLED;
    let body = loop {
        let (status, body) = ask(&ann).await;
        assert_eq!(status, 200, "{body}");
        if body["status"] != "queued" {
            break body;
        }
        assert!(tokio::time::Instant::now() < deadline, "still queued");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(body["status"], "success", "{body}");
    assert_eq!(body["order"]["order_id"], order_id);
    assert_eq!(body["order"]["voucher_id"], v);
    assert_eq!(body["order"]["status"], "unpaid");

    let (status, body) = ask(&eve).await;
    assert_eq!((status.as_u16(), code(&body)), (404, "unknown_order"));
    app.stop().await;
}

/// The window is decided by Redis time: a window in the past is `ended`.
#[tokio::test]
async fn gate_refuses_after_the_window() {
    let app = TestApp::spawn().await;
    let backend = app.backend();
    let mut redis = app.redis.clone();
    let now = chrono::Utc::now().timestamp_millis();
    let row = |id, begins_at, ends_at| VoucherRow {
        id,
        title: "t".into(),
        stock: 5,
        stock_left: 5,
        begins_at,
        ends_at,
        ..VoucherRow::default()
    };
    let snapshot = |buyers| RebuildSource { stock_left: 5, buyers, ..RebuildSource::default() };
    let past = app.keys(900_001);
    let (ended, none) = (row(900_001, now - 60_000, now - 1_000), snapshot(vec![]));
    let held = warm::load(&backend, &mut redis, &past, &ended, &none);
    assert!(!held.await.unwrap(), "a fresh voucher is loaded");
    let verdict = gate::grab(&backend, &past, (900_001, 1, 42), "").await.unwrap();
    assert_eq!(verdict, Verdict::Refused(ErrorCode::Ended));

    let open = app.keys(900_002);
    let (running, one_buyer) = (row(900_002, now - 1_000, now + 60_000), snapshot(vec![(7, 41)]));
    let held = warm::load(&backend, &mut redis, &open, &running, &one_buyer);
    assert!(!held.await.unwrap());
    let verdict = gate::grab(&backend, &open, (900_002, 7, 43), "").await.unwrap();
    assert_eq!(verdict, Verdict::Bought(41), "warm-up loads buyers, each with their order");
    let verdict = gate::grab(&backend, &open, (900_002, 8, 44), "").await.unwrap();
    assert_eq!(verdict, Verdict::Granted);
    app.stop().await;
}

/// A Redis that forgot the scripts (restarted empty, or a replica promoted) is handed
/// each again by the first call that needs it: the gate's, then the worker's settle.
/// A Redis of its own: the flush would shift the count of script calls of the tests
/// that lose the answer to the nth one (`recovery`).
#[tokio::test]
async fn a_redis_that_forgot_the_scripts_is_handed_them_again() {
    let dir = tempfile::TempDir::new().unwrap();
    let private = seckill::server::local_redis::LocalRedis::start(dir.path()).await.unwrap();
    let app = TestApp::with(Options::default().with(|c| c.redis_url = Some(private.url.clone()))).await;
    let ann = app.sign_in("ann").await;
    let v = app.create_voucher(2, -5, 3600).await;
    let () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut app.redis.clone()).await.unwrap();
    let (status, body) = app.grab(&ann, v).await;
    assert_eq!(status, 200, "{body}");
    let stats =
        app.wait_for_stats("order persisted and settled", v, |s| s["persisted"] == 1 && s["pending"] == 0).await;
    assert_eq!(stats["redis_stock"], 1);
    app.stop().await;
    private.stop().await;
}

/// Grabs of one sale that arrive together ride in shared gate calls (a few calls
/// started at once, each deciding up to `MOST_PER_CALL`), and each is decided as if
/// alone: 100 units and 300 grabs at once by 250 shoppers, 50 of them twice: exactly
/// 100 granted, no shopper twice, every refusal counted.
#[tokio::test]
async fn grabs_arriving_together_share_gate_calls_and_each_is_decided_as_alone() {
    use seckill::testing::{Ask, Batches, Bucket, CALLS_PER_SALE, MOST_PER_CALL};
    use std::{collections::HashSet, sync::Arc};
    let app = TestApp::spawn().await;
    let v = app.create_voucher(100, -5, 3600).await;
    let (backend, keys) = (app.backend(), app.keys(v));
    let batches = Arc::new(Batches::default());
    let users: Vec<i64> = (1..=250).chain(1..=50).collect();
    let grabs = users.iter().enumerate().map(|(i, &user_id)| {
        let (batches, backend) = (batches.clone(), backend.clone());
        let ask = Ask { user_id, order_id: 7_000_000_000 + i as i64, token: String::new() };
        async move { (user_id, batches.decide(&backend, Bucket::whole(v), ask).await.unwrap()) }
    });
    let decided = futures::future::join_all(grabs).await;
    let granted: Vec<i64> = decided.iter().filter(|(_, d)| *d == Verdict::Granted).map(|(u, _)| *u).collect();
    assert_eq!(granted.len(), 100, "every unit, no more");
    assert_eq!(granted.iter().collect::<HashSet<_>>().len(), 100, "no shopper twice");
    for (_, d) in decided.iter().filter(|(_, d)| *d != Verdict::Granted) {
        assert!(matches!(d, Verdict::Refused(ErrorCode::SoldOut) | Verdict::Bought(_)), "{d:?}");
    }
    let at_least = users.len().div_ceil(MOST_PER_CALL) as u64;
    let calls = batches.calls();
    assert!((at_least..=at_least + CALLS_PER_SALE as u64).contains(&calls), "300 grabs at once in {calls} gate calls");
    let mut redis = app.redis.clone();
    let left: i64 = redis::cmd("GET").arg(&*keys.left).query_async(&mut redis).await.unwrap();
    let refused: i64 = redis::cmd("GET").arg(&keys.refused).query_async(&mut redis).await.unwrap();
    let buyers: i64 = redis::cmd("HLEN").arg(&keys.buyers).query_async(&mut redis).await.unwrap();
    assert_eq!((left, buyers, refused), (0, 100, 200), "units left, buyers, refusals counted");
    app.stop().await;
}

/// A gate call's grabs come from every serving runtime of the process, and the answers
/// of another runtime's grabs are handed to its mailbox in one go. Three runtimes grab
/// at once, the first holding both call slots before the others join: each grab hears
/// its own verdict (shoppers who bought before hear their own order), and the other
/// two runtimes' hundred answers all went by way of their mailboxes.
#[tokio::test]
async fn a_calls_answers_reach_grabs_on_other_runtimes_through_their_mailboxes() {
    use seckill::testing::{mailbox, Ask, Batches, Bucket};
    use std::sync::{Arc, Barrier};
    let app = TestApp::spawn().await;
    let v = app.create_voucher(200, -5, 3600).await;
    let backend = app.backend();
    let batches = Arc::new(Batches::default());
    let ask = |user_id: i64, order_id: i64| Ask { user_id, order_id, token: String::new() };
    let bought_before = |user_id: i64| (11..=35).contains(&user_id) || (61..=85).contains(&user_id);
    for user_id in (1..=110).filter(|&u| bought_before(u)) {
        let earlier = ask(user_id, 8_000_000_000 + user_id);
        assert_eq!(batches.decide(&backend, Bucket::whole(v), earlier).await.unwrap(), Verdict::Granted);
    }
    let handed_before = batches.handed();
    // The first runtime's grabs start both call slots; the others' join them before
    // the first runtime runs a call (it waits at the second meeting). All stay until
    // every grab is answered: the calls run on the first.
    let (first, second) = (Arc::new(Barrier::new(3)), Arc::new(Barrier::new(3)));
    let answered = Arc::new(tokio::sync::Barrier::new(3));
    let shares: [Vec<i64>; 3] = [(1..=10).collect(), (11..=60).collect(), (61..=110).collect()];
    let threads: Vec<_> = shares
        .into_iter()
        .enumerate()
        .map(|(i, users)| {
            let (batches, backend) = (batches.clone(), backend.clone());
            let (first, second, answered) = (first.clone(), second.clone(), answered.clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                runtime.block_on(async move {
                    tokio::spawn(mailbox());
                    if i > 0 {
                        first.wait();
                    }
                    let grabs = users.iter().map(|&user_id| {
                        let (batches, backend) = (batches.clone(), backend.clone());
                        async move {
                            let verdict =
                                batches.decide(&backend, Bucket::whole(v), ask(user_id, 9_000_000_000 + user_id));
                            (user_id, verdict.await.map_err(|e| e.to_string()))
                        }
                    });
                    let mut all = Box::pin(futures::future::join_all(grabs));
                    assert!(futures::poll!(&mut all).is_pending(), "every grab waits for a call");
                    if i == 0 {
                        first.wait();
                    }
                    second.wait();
                    let decided = all.await;
                    answered.wait().await;
                    decided
                })
            })
        })
        .collect();
    // Bounded: a runtime that failed leaves the others waiting at a meeting.
    let joined = tokio::task::spawn_blocking(move || threads.into_iter().flat_map(|t| t.join().unwrap()).collect());
    let decided: Vec<_> = tokio::time::timeout(SETTLED, joined).await.expect("every grab answered in time").unwrap();
    assert_eq!(decided.len(), 110);
    for (user_id, verdict) in decided {
        let own = if bought_before(user_id) { Verdict::Bought(8_000_000_000 + user_id) } else { Verdict::Granted };
        assert_eq!(verdict, Ok(own), "shopper {user_id}'s own answer");
    }
    assert_eq!(
        batches.handed() - handed_before,
        100,
        "the second and third runtimes' answers, through their mailboxes"
    );
    app.stop().await;
}
