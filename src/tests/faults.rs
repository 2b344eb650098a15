//! Fault drills: after a fault the sale goes on by itself, grabs never hang, and the
//! invariants hold (I1 no oversell, I2 one per user, I3 nothing persisted is lost,
//! I4 conservation).

use crate::support::{code, wait_until, Options, TestApp};
use seckill::server::local_redis::LocalRedis;
use std::time::{Duration, Instant};

/// Redis comes back empty after an outage (a restart without persistence, or a
/// failover that lost data): grabs answer `unavailable` within their deadline while
/// Redis is silent, the sale resumes without anyone calling `warm_up`, persisted
/// buyers cannot buy again, and stock is conserved.
#[tokio::test]
async fn redis_back_empty_after_an_outage() {
    let dir = tempfile::TempDir::new().unwrap();
    let private = LocalRedis::start(dir.path()).await.unwrap();
    let app = TestApp::with(Options { redis_url: Some(private.url.clone()), ..Options::default() }).await;
    let v = app.create_voucher(20, -5, 3600).await;
    let early = app.sign_in_many("early", 5).await;
    for s in &early {
        assert_eq!(app.grab(s, v).await.0, 200);
    }
    app.wait_for_stats("5 persisted", v, |s| s["persisted"] == 5 && s["pending"] == 0).await;
    let late = app.sign_in_many("late", 5).await;

    // Redis loses everything, then answers nobody for 4 seconds.
    let client = redis::Client::open(private.url.as_str()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let () = redis::cmd("FLUSHALL").query_async(&mut admin).await.unwrap();
    let () = redis::cmd("CLIENT").arg("PAUSE").arg(4_000).arg("ALL").query_async(&mut admin).await.unwrap();
    let answers_again = Instant::now() + Duration::from_secs(4);
    let asked = Instant::now();
    let (status, body) = app.grab(&late[0], v).await;
    assert!(asked.elapsed() < Duration::from_secs(3), "a grab waited {:?}", asked.elapsed());
    assert_eq!((status.as_u16(), code(&body)), (503, "unavailable"));

    // Once Redis answers again the worker rebuilds the voucher from the database.
    wait_until("the sale resumes by itself", Duration::from_secs(30), || async {
        app.grab(&late[1], v).await.0 == 200
    })
    .await;
    let after = Instant::now().saturating_duration_since(answers_again);
    println!("drill redis_back_empty: sales resumed {after:?} after Redis answered again");
    for s in &early {
        let (status, body) = app.grab(s, v).await;
        assert_eq!((status.as_u16(), code(&body)), (409, "already_bought"), "I2 after the rebuild");
    }
    for s in &late[2..] {
        assert_eq!(app.grab(s, v).await.0, 200);
    }
    let stats = app.wait_for_stats("all persisted", v, |s| s["persisted"] == s["granted"] && s["pending"] == 0).await;
    let n = |k: &str| stats[k].as_i64().unwrap();
    assert!(n("granted") >= 9 && n("persisted") <= 20, "I1: {stats}");
    assert_eq!(n("redis_stock") + n("granted"), 20, "I4: {stats}");
    assert_eq!(n("dead_letters"), 0);
    app.stop().await;
    private.stop().await;
}

/// A stop (SIGTERM or Ctrl-C) in the middle of a storm: the process stops within its
/// grace, every grab it answered `queued` is persisted exactly once (by it, or by the
/// next process from the pending list), and the rest were refused, never lost.
#[tokio::test]
async fn a_stop_in_the_middle_of_a_storm_loses_nothing() {
    use futures::{stream, StreamExt};
    use std::collections::HashSet;

    let app = TestApp::spawn().await;
    let v = app.create_voucher(300, -5, 3600).await;
    let shoppers = app.sign_in_many("storm", 800).await;
    let api = app.api.clone();
    let storm = tokio::spawn(async move {
        stream::iter(shoppers)
            .map(|s| {
                let api = api.clone();
                async move { (s.user_id, api.grab(&s, v).await) }
            })
            .buffer_unordered(64)
            .collect::<Vec<_>>()
            .await
    });
    app.wait_for_stats("the storm is under way", v, |s| s["granted"].as_i64() >= Some(50)).await;
    let restart = app.restart_options();
    let stopping = Instant::now();
    app.stop().await;
    let took = stopping.elapsed();
    assert!(took < Duration::from_secs(25), "stopped in {took:?}");

    let answers = storm.await.unwrap();
    let queued: HashSet<i64> = answers
        .iter()
        .filter(|(_, a)| a.as_ref().is_ok_and(|(status, _)| status.as_u16() == 200))
        .map(|(user, _)| *user)
        .collect();
    let refused = answers.iter().filter(|(_, a)| a.as_ref().is_ok_and(|(s, _)| s.as_u16() == 503)).count();
    let unreachable = answers.iter().filter(|(_, a)| a.is_err()).count();

    // The next process takes over whatever the stopped one left pending.
    let app = TestApp::with(Options { claim_idle_ms: 500, ..restart }).await;
    let stats = app.wait_for_stats("all persisted", v, |s| s["persisted"] == s["granted"] && s["pending"] == 0).await;
    let persisted: Vec<i64> =
        sqlx::query_scalar("SELECT user_id FROM orders WHERE voucher_id = ?").bind(v).fetch_all(&app.db).await.unwrap();
    let unique: HashSet<i64> = persisted.iter().copied().collect();
    println!(
        "drill stop_in_storm: stopped in {took:?}; {} answered queued, {refused} unavailable, {unreachable} \
         unreachable; {} persisted, {} duplicated",
        queued.len(),
        persisted.len(),
        persisted.len() - unique.len()
    );
    assert_eq!(unique.len(), persisted.len(), "I5: one order per grab");
    assert!(queued.is_subset(&unique), "I3: every grab answered queued is persisted");
    let n = |k: &str| stats[k].as_i64().unwrap();
    assert_eq!(n("redis_stock") + n("granted"), 300, "I4: {stats}");
    assert_eq!(n("dead_letters"), 0);
    app.stop().await;
}
