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
