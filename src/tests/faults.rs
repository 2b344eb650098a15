//! Fault drills: after a fault the sale goes on by itself, grabs never hang, and the
//! invariants hold (I1 no oversell, I2 one per user, I3 nothing persisted is lost,
//! I4 conservation).

use crate::support::{
    code, logs,
    process::{Process, Shared},
    redis_url, wait_until, Options, Shopper, TestApp, Watchdog, SETTLED, SOON,
};
use crate::support::{connect_db, hold_write_lock, PASSWORD};
use futures::{stream, StreamExt};
use redis::streams::StreamPendingCountReply;
use reqwest::StatusCode;
use seckill::{
    client::ApiClient,
    server::local_redis::LocalRedis,
    testing::{Db, RedisConn, SaleKeys, GROUP},
};
use serde_json::{json, Value};
use std::{
    collections::HashSet,
    time::{Duration, Instant},
};
use tempfile::TempDir;

type Answer = (i64, Result<(StatusCode, Value), String>);

/// One grab per shopper, 64 at a time, sent to the processes in turn.
async fn storm(apis: Vec<ApiClient>, shoppers: Vec<Shopper>, v: i64) -> Vec<Answer> {
    stream::iter(shoppers.into_iter().enumerate())
        .map(|(i, s)| {
            let api = apis[i % apis.len()].clone();
            async move { (s.user_id, api.grab(&s, v).await) }
        })
        .buffer_unordered(64)
        .collect()
        .await
}

/// Users whose grab was answered `queued`.
fn queued(answers: &[Answer]) -> HashSet<i64> {
    answers.iter().filter(|(_, a)| a.as_ref().is_ok_and(|(s, _)| s.as_u16() == 200)).map(|(u, _)| *u).collect()
}

/// Waits until every granted order is persisted, then checks I1–I5 against the
/// database and returns a line of counts for the drill's report.
async fn books_balance(api: &ApiClient, db: &Db, v: i64, stock: i64, queued: &HashSet<i64>) -> String {
    // Two of the settling limit: the storm's orders wait out the fault, then persist.
    let deadline = Instant::now() + 2 * SETTLED;
    let stats = loop {
        let s = api.stats(v).await.unwrap();
        if s["persisted"] == s["granted"] && s["pending"] == 0 {
            break s;
        }
        assert!(Instant::now() < deadline, "orders still not persisted: {s}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let n = |k: &str| stats[k].as_i64().unwrap();
    let users: Vec<i64> =
        sqlx::query_scalar("SELECT user_id FROM orders WHERE voucher_id = $1").bind(v).fetch_all(db).await.unwrap();
    let distinct: HashSet<i64> = users.iter().copied().collect();
    let left: i64 =
        sqlx::query_scalar("SELECT stock_left FROM vouchers WHERE id = $1").bind(v).fetch_one(db).await.unwrap();
    let lost = queued.difference(&distinct).count();
    assert!(users.len() as i64 <= stock, "I1 no oversell: {} orders", users.len());
    assert_eq!(distinct.len(), users.len(), "I2/I5: an order twice");
    assert_eq!(lost, 0, "I3: grabs answered queued but not persisted");
    assert_eq!(n("redis_stock") + n("granted"), stock, "I4 in Redis: {stats}");
    assert_eq!(left + users.len() as i64, stock, "I4 in the database");
    let given_back = n("dead_letters");
    format!(
        "granted {}, persisted {}, answered queued {}, failed and given back {given_back}, lost {lost}, duplicated {}",
        n("granted"),
        users.len(),
        queued.len(),
        users.len() - distinct.len()
    )
}

/// Entries pending on one consumer of the voucher's group.
async fn pending_on(redis: &mut RedisConn, stream: &str, consumer: &str) -> usize {
    let reply: redis::RedisResult<StreamPendingCountReply> = redis::cmd("XPENDING")
        .arg(stream)
        .arg(GROUP)
        .arg("-")
        .arg("+")
        .arg(10_000)
        .arg(consumer)
        .query_async(redis)
        .await;
    reply.map(|r| r.ids.len()).unwrap_or(0)
}

/// How many times each pending entry of the group was delivered.
async fn deliveries(redis: &mut RedisConn, stream: &str) -> Vec<usize> {
    let reply: StreamPendingCountReply =
        redis::cmd("XPENDING").arg(stream).arg(GROUP).arg("-").arg("+").arg(10_000).query_async(redis).await.unwrap();
    reply.ids.iter().map(|p| p.times_delivered).collect()
}

/// The most times any pending entry of the group was delivered.
async fn most_deliveries(redis: &mut RedisConn, stream: &str) -> usize {
    deliveries(redis, stream).await.into_iter().max().unwrap_or(0)
}

/// A drill's shared stores: a fresh SQLite file and namespace on the test Redis.
async fn stores(dir: &TempDir, redis: &str) -> (Shared, RedisConn) {
    let shared = Shared::new(dir.path(), redis).await;
    let conn = RedisConn::open(redis).await.unwrap();
    (shared, conn)
}

/// A test app on a Redis of its own, on a steady port: the drill crashes it and starts
/// it again there (`LocalRedis::start_on`).
async fn app_on_own_redis(dir: &std::path::Path) -> (LocalRedis, TestApp) {
    let private = LocalRedis::start_steady(dir).await.unwrap();
    let app = TestApp::with(Options::default().with(|c| c.redis_url = Some(private.url.clone()))).await;
    (private, app)
}

/// Redis comes back empty after an outage (a restart without persistence, or a
/// failover that lost data): grabs answer `unavailable` within their deadline while
/// Redis is silent and the shop lists its sales from the database meanwhile, the sale
/// resumes without anyone calling `warm_up`, persisted buyers cannot buy again, and
/// stock is conserved.
#[tokio::test]
async fn redis_back_empty_after_an_outage() {
    let _watchdog = Watchdog::arm();
    let dir = tempfile::TempDir::new().unwrap();
    let private = LocalRedis::start(dir.path()).await.unwrap();
    let app = TestApp::with(Options::default().with(|c| c.redis_url = Some(private.url.clone()))).await;
    let v = app.create_voucher(20, -5, 3600).await;
    let early = app.sign_in_many("early", 5).await;
    for s in &early {
        assert_eq!(app.grab(s, v).await.0, 200);
    }
    app.wait_for_stats("5 persisted", v, |s| s["persisted"] == 5 && s["pending"] == 0).await;
    let late = app.sign_in_many("late", 5).await;

    // Redis loses everything, then answers nobody for 10 seconds.
    let client = redis::Client::open(private.url.as_str()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let () = redis::cmd("FLUSHALL").query_async(&mut admin).await.unwrap();
    let () = redis::cmd("CLIENT").arg("PAUSE").arg(10_000).arg("ALL").query_async(&mut admin).await.unwrap();
    let answers_again = Instant::now() + Duration::from_secs(10); // the pause just set
    let asked = Instant::now();
    // Each answers while Redis is still silent: none waits for it (the grab gives Redis
    // its 2 s deadline, the list and the page a quarter of a second).
    let (status, body) = app.grab(&late[0], v).await;
    assert!(Instant::now() < answers_again, "a grab waited {:?}, until Redis answered", asked.elapsed());
    assert_eq!((status.as_u16(), code(&body)), (503, "unavailable"));
    // The shop still shows its sales, with the database's stock, without waiting on Redis.
    let (status, listed) = app.call("list_vouchers", json!({}), &[]).await;
    let page = app.http.get(format!("{}/", app.base)).send().await.unwrap();
    assert!(Instant::now() < answers_again, "the list and the page waited {:?}, until Redis answered", asked.elapsed());
    assert_eq!((status.as_u16(), listed["items"][0]["remaining"].as_i64()), (200, Some(15)), "{listed}");
    assert_eq!(page.status(), 200);

    // Once Redis answers again the worker rebuilds the voucher from the database.
    wait_until("the sale resumes by itself", SETTLED, || async { app.grab(&late[1], v).await.0 == 200 }).await;
    let after = Instant::now().saturating_duration_since(answers_again);
    println!("drill redis_back_empty: sales resumed {after:?} after Redis answered again");
    for s in &early {
        let (status, body) = app.grab(s, v).await;
        assert_eq!((status.as_u16(), code(&body)), (409, "already_bought"), "I2 after the rebuild");
        assert!(body["order_id"].as_str().is_some_and(|id| id.parse::<i64>().is_ok()), "the order, rebuilt: {body}");
    }
    for s in &late[2..] {
        assert_eq!(app.grab(s, v).await.0, 200);
    }
    let stats = app.wait_for_stats("all persisted", v, |s| s["persisted"] == s["granted"] && s["pending"] == 0).await;
    let n = |k: &str| stats[k].as_i64().unwrap();
    assert!(n("granted") >= 9 && n("persisted") <= 20, "I1: {stats}");
    assert_eq!(n("redis_stock") + n("granted"), 20, "I4: {stats}");
    assert_eq!(n("dead_letters"), 0);
    println!(
        "drill redis_back_empty: granted {}, persisted {}, failed and given back 0, lost 0, duplicated 0 \
         (Redis held nothing unpersisted when it was emptied)",
        n("granted"),
        n("persisted")
    );
    app.stop().await;
    private.stop().await;
}

/// Redis down long enough for the worker's pauses between retries to reach their
/// longest, then back empty: the first order granted once the sale resumes is saved
/// soon, like any other (the grant rings the reader out of its pause, now at most
/// 1 s). Before, it waited for the worker's reader to wake from a pause of up to 5 s:
/// its shopper saw "queued" that long. The bound leaves a busy machine its stalls.
#[tokio::test]
async fn the_first_order_after_redis_returns_is_saved_at_once() {
    let _watchdog = Watchdog::arm();
    let (dir, empty) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let (private, app) = app_on_own_redis(dir.path()).await;
    let port = private.port;
    let v = app.create_voucher(10, -5, 3600).await;
    let shoppers = app.sign_in_many("returns", 2).await;
    assert_eq!(app.grab(&shoppers[0], v).await.0, 200);
    app.wait_for_stats("the first order persisted", v, |s| s["persisted"] == 1 && s["pending"] == 0).await;

    private.crash().await;
    // The outage itself, not a wait for something: the reader's pauses double from
    // 100 ms while it lasts (past 6 s they were 5 s long).
    tokio::time::sleep(Duration::from_secs(8)).await;
    let private = LocalRedis::start_on(empty.path(), port).await.unwrap();
    let deadline = Instant::now() + SETTLED;
    let order_id = loop {
        let (status, body) = app.grab(&shoppers[1], v).await;
        if status == 200 {
            break body["order_id"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "the sale did not resume: {status} {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let granted = Instant::now();
    let ask = json!({ "voucher_id": v, "order_id": order_id });
    loop {
        let (status, body) = app.call("grab_result", ask.clone(), &[("cookie", &shoppers[1].cookie)]).await;
        assert_eq!(status, 200, "{body}");
        if body["status"] == "success" {
            break;
        }
        assert!(granted.elapsed() < Duration::from_secs(5), "still {body} {:?} after its grant", granted.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("drill first_order_after_redis_returns: saved {:?} after its grant", granted.elapsed());
    app.stop().await;
    private.stop().await;
}

/// kill -9 of one of three processes while they persist a storm: the others take over
/// what the dead one had read, every grab answered `queued` is persisted once, and the
/// sale never stops (the survivors answer throughout). In the second pass of `npm test`
/// this runs on PostgreSQL and a Redis Cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_in_the_middle_of_persisting_a_storm() {
    let _watchdog = Watchdog::arm();
    let dir = TempDir::new().unwrap();
    let (shared, mut redis) = stores(&dir, &redis_url()).await;
    let claim = [("SECKILL_CLAIM_IDLE_MS", "1000"), ("SECKILL_BATCH_SIZE", "20")];
    let a = Process::start(&shared, &[claim[0], claim[1], ("SECKILL_WORKER_NAME", "drill-a")]).await;
    let b = Process::start(&shared, &claim).await;
    let c = Process::start(&shared, &claim).await;
    let v = b
        .api
        .create_voucher("kill -9 drill", 1500, chrono::Utc::now(), chrono::Utc::now() + chrono::Duration::hours(1))
        .await
        .unwrap();
    let shoppers = b.api.shoppers("kill9", 2000, PASSWORD, 64).await.unwrap();
    let stream = SaleKeys::new(&shared.namespace, v).orders;
    let fired = tokio::spawn(storm(vec![a.api.clone(), b.api.clone(), c.api.clone()], shoppers, v));

    // Kill A while it holds entries it has read and not acknowledged.
    let deadline = Instant::now() + SETTLED;
    let held = loop {
        let held = pending_on(&mut redis, &stream, "drill-a").await;
        if held > 0 {
            break held;
        }
        assert!(Instant::now() < deadline, "process A never held an entry");
    };
    a.kill9().await;
    let killed = Instant::now();
    wait_until("B and C take over what A held", SETTLED, || {
        let (mut redis, stream) = (redis.clone(), stream.clone());
        async move { pending_on(&mut redis, &stream, "drill-a").await == 0 }
    })
    .await;
    let took_over = killed.elapsed();
    let answers = fired.await.unwrap();
    let unreachable = answers.iter().filter(|(_, a)| a.is_err()).count();
    let db = connect_db(&shared.database_url).await;
    let books = books_balance(&b.api, &db, v, 1500, &queued(&answers)).await;
    println!(
        "drill kill_9 (3 processes): A killed holding {held} read entries, taken over in {took_over:?}; {books}; \
         {unreachable} grabs sent to A after its death failed to connect, the sale never stopped"
    );
    b.terminate(Duration::from_secs(20)).await.expect("B stops");
    c.terminate(Duration::from_secs(20)).await.expect("C stops");
}

/// SIGTERM in the middle of a storm: the process refuses new grabs, finishes the
/// batch in hand and exits cleanly within its grace; the next process persists
/// whatever it left, and every grab answered `queued` is persisted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_in_the_middle_of_a_storm_loses_nothing() {
    let _watchdog = Watchdog::arm();
    let dir = TempDir::new().unwrap();
    let (shared, _redis) = stores(&dir, &redis_url()).await;
    let a = Process::start(&shared, &[]).await;
    let v = a
        .api
        .create_voucher("SIGTERM drill", 300, chrono::Utc::now(), chrono::Utc::now() + chrono::Duration::hours(1))
        .await
        .unwrap();
    let shoppers = a.api.shoppers("term", 800, PASSWORD, 64).await.unwrap();
    let fired = tokio::spawn(storm(vec![a.api.clone()], shoppers, v));
    wait_until("the storm is under way", SETTLED, || {
        let api = a.api.clone();
        async move { api.stats(v).await.is_ok_and(|s| s["granted"].as_i64() >= Some(50)) }
    })
    .await;
    let api = a.api.clone();
    let stopping = Instant::now();
    let status = a.terminate(Duration::from_secs(25)).await.expect("exits within its grace");
    let took = stopping.elapsed();
    assert!(status.success(), "{status}");
    let answers = fired.await.unwrap();
    let refused = answers.iter().filter(|(_, a)| a.as_ref().is_ok_and(|(s, _)| s.as_u16() == 503)).count();
    let unreachable = answers.iter().filter(|(_, a)| a.is_err()).count();
    drop(api);

    let b = Process::start(&shared, &[("SECKILL_CLAIM_IDLE_MS", "500")]).await;
    let db = connect_db(&shared.database_url).await;
    let books = books_balance(&b.api, &db, v, 300, &queued(&answers)).await;
    println!(
        "drill sigterm: exited cleanly in {took:?}; {books}; {refused} answered unavailable, {unreachable} unreachable"
    );
    b.terminate(Duration::from_secs(20)).await.expect("B stops");
}

/// The database cannot write for longer than the claim idle time (a writer holds
/// SQLite's lock) while two processes run, one of them is killed holding orders, and
/// deliveries pass SECKILL_MAX_DELIVERIES: nothing is dead-lettered, shoppers can
/// still sign in, and once the lock goes every order is persisted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_blocked_past_the_claim_time_fails_nobody() {
    let _watchdog = Watchdog::arm();
    let dir = TempDir::new().unwrap();
    let (shared, mut redis) = stores(&dir, &redis_url()).await;
    let settings = [("SECKILL_CLAIM_IDLE_MS", "1000"), ("SECKILL_MAX_DELIVERIES", "2"), ("SECKILL_DB_BUSY_MS", "200")];
    let a = Process::start(&shared, &[settings[0], settings[1], settings[2], ("SECKILL_WORKER_NAME", "drill-a")]).await;
    let b = Process::start(&shared, &settings).await;
    let v = b
        .api
        .create_voucher("locked drill", 40, chrono::Utc::now(), chrono::Utc::now() + chrono::Duration::hours(1))
        .await
        .unwrap();
    let shoppers = b.api.shoppers("locked", 30, PASSWORD, 30).await.unwrap();
    let stream = SaleKeys::new(&shared.namespace, v).orders;

    wait_until("A's worker reads the voucher's stream", SETTLED, || {
        let (mut redis, stream) = (redis.clone(), stream.clone());
        async move {
            let consumers: redis::RedisResult<redis::streams::StreamInfoConsumersReply> =
                redis::AsyncCommands::xinfo_consumers(&mut redis, &stream, GROUP).await;
            consumers.is_ok_and(|c| c.consumers.iter().any(|c| c.name == "drill-a"))
        }
    })
    .await;
    // Another writer takes the write lock and keeps it (on PostgreSQL the vouchers'
    // rows, which every write of an order takes).
    let mut blocker = hold_write_lock(&shared.database_url, "vouchers").await;
    let locked = Instant::now();
    // Grabs need Redis only. One at a time, through both, until A has read some.
    let mut answers = Vec::new();
    for (i, s) in shoppers.iter().enumerate() {
        let api = if i % 2 == 0 { &a.api } else { &b.api };
        answers.push((s.user_id, api.grab(s, v).await));
        if i >= 9 && pending_on(&mut redis, &stream, "drill-a").await > 0 {
            break;
        }
    }
    let queued = queued(&answers);
    assert_eq!(queued.len(), answers.len(), "every grab is queued while the database is locked");
    assert!(pending_on(&mut redis, &stream, "drill-a").await > 0, "A holds orders it cannot write");
    a.kill9().await;
    let sign_in = json!({ "name": "locked-0", "password": PASSWORD });
    let (status, body) = b.api.call("sign_in", sign_in, &[]).await.unwrap();
    assert_eq!(status, 200, "signing in writes nothing: {body}");
    wait_until("B claims A's orders and fails to write them again and again", SETTLED, || {
        let (mut redis, stream) = (redis.clone(), stream.clone());
        async move {
            pending_on(&mut redis, &stream, "drill-a").await == 0 && most_deliveries(&mut redis, &stream).await > 3
        }
    })
    .await;
    let deliveries = most_deliveries(&mut redis, &stream).await;
    assert_eq!(b.api.stats(v).await.unwrap()["dead_letters"], 0, "nothing dead-lettered while the lock is held");
    sqlx::query("ROLLBACK").execute(&mut blocker).await.unwrap();
    let held = locked.elapsed();

    let db = connect_db(&shared.database_url).await;
    let books = books_balance(&b.api, &db, v, 40, &queued).await;
    let results: Vec<String> =
        redis::AsyncCommands::hvals(&mut redis, SaleKeys::new(&shared.namespace, v).results).await.unwrap();
    assert!(results.iter().all(|r| r.starts_with("success:")), "every shopper reads success: {results:?}");
    println!(
        "drill database_blocked: write lock held {held:?} (claim idle 1 s, busy timeout 0.2 s), A killed holding \
         orders, deliveries up to {deliveries} with SECKILL_MAX_DELIVERIES=2; {books}"
    );
    b.terminate(Duration::from_secs(20)).await.expect("B stops");
}

/// Redis restarts (killed, and started again from its append-only file) while nobody
/// grabs. Each serving thread holds its own connection, found dead only by the first
/// call made on it: that call is sent again once the connection is made anew, so the
/// first grab on each thread is answered like any other. Before, it answered
/// `unavailable` (`grab: broken pipe`) while the sale had resumed everywhere else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_grab_on_each_thread_after_a_redis_restart_is_answered() {
    let _watchdog = Watchdog::arm();
    let dir = TempDir::new().unwrap();
    // Two serving threads (the tests' default); a client that opens a new connection
    // for each request, so the grabs are handed to the threads in turn.
    let (private, app) = app_on_own_redis(dir.path()).await;
    let port = private.port;
    let fresh = ApiClient::new(&app.base, "", 0);
    let v = app.create_voucher(100, -5, 3600).await;
    let shoppers = app.sign_in_many("restart", 8).await;
    for s in &shoppers[..2] {
        let (status, body) = fresh.grab(s, v).await.unwrap();
        assert_eq!(status, 200, "before the restart: {body}");
    }
    private.crash().await;
    let private = LocalRedis::start_on(dir.path(), port).await.unwrap();
    let answers = stream::iter(&shoppers[2..]).then(|s| fresh.grab(s, v)).collect::<Vec<_>>().await;
    for (i, answer) in answers.into_iter().enumerate() {
        let (status, body) = answer.unwrap();
        assert_eq!(status, 200, "grab {} after Redis answered again: {body}", i + 1);
    }
    app.stop().await;
    private.stop().await;
}

/// Redis killed (SIGKILL) in the middle of a storm and restarted from its append-only
/// file (`appendfsync always`, the one-box default) 3 s later: nothing it answered is
/// lost, the sale resumes by itself within seconds of Redis answering again, and the
/// books balance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restarted_from_its_append_only_file() {
    let _watchdog = Watchdog::arm();
    let dir = TempDir::new().unwrap();
    let (private, app) = app_on_own_redis(dir.path()).await;
    let port = private.port;
    let v = app.create_voucher(400, -5, 3600).await;
    // The probe's own sale, which the storm does not sell out: only Redis can answer it.
    let other = app.create_voucher(10, -5, 3600).await;
    let shoppers = app.sign_in_many("aof", 1000).await;
    let probe = app.sign_in("aof-probe").await;
    let fired = tokio::spawn(storm(vec![app.api.clone()], shoppers, v));
    app.wait_for_stats("the storm is under way", v, |s| s["granted"].as_i64() >= Some(100)).await;
    private.crash().await;
    let crashed = Instant::now();
    // Redis stays down for 3 s, as a real restart does, and grabs keep coming: each
    // answers `unavailable` within its deadline on Redis. The bound leaves 2 s for the
    // round trip on a loaded machine; a grab that waited out reconnection attempts
    // instead would take longer.
    while crashed.elapsed() < Duration::from_secs(3) {
        let asked = Instant::now();
        let (status, body) = app.grab(&probe, other).await;
        let bound = seckill::testing::REDIS_DEADLINE + Duration::from_secs(2);
        assert!(asked.elapsed() < bound, "a grab waited {:?}", asked.elapsed());
        assert_eq!((status.as_u16(), code(&body)), (503, "unavailable"));
    }
    let private = LocalRedis::start_on(dir.path(), port).await.unwrap();
    let back = Instant::now();
    // The gate answers again within seconds (the connection is made again about once
    // a second), without anyone restarting the app.
    wait_until("the sale resumes by itself", SOON, || async { app.grab(&probe, other).await.0 == 200 }).await;
    let (unavailable, resumed) = (crashed.elapsed(), back.elapsed());
    let answers = fired.await.unwrap();
    let queued = queued(&answers);
    let refused = answers.iter().filter(|(_, a)| a.as_ref().is_ok_and(|(s, _)| s.as_u16() == 503)).count();
    let books = books_balance(&app.api, &app.db, v, 400, &queued).await;
    println!(
        "drill redis_aof_restart: sale unavailable {unavailable:?} from the crash (3 s down, restart included), \
         resumed {resumed:?} after Redis answered again; {books}; {refused} grabs answered unavailable meanwhile"
    );
    app.stop().await;
    private.stop().await;
}

/// A sale created while Redis does not answer (a cluster's node down, say) is saved and
/// answered (review, 2026-11-30: it answered `unavailable`, an answer an
/// Idempotency-Key does not keep, so the retry made a second sale), and the worker
/// warms it once Redis answers: it sells without anyone calling `warm_up`.
#[tokio::test]
async fn a_sale_created_while_redis_is_down_is_answered_and_warmed_once_it_is_back() {
    let _watchdog = Watchdog::arm();
    let dir = TempDir::new().unwrap();
    let (private, app) = app_on_own_redis(dir.path()).await;
    let port = private.port;
    let shopper = app.sign_in("after-the-outage").await;
    private.crash().await;
    let now = chrono::Utc::now();
    let body = json!({ "title": "Made in an outage", "stock": 7, "begins_at": now.to_rfc3339(),
                       "ends_at": (now + chrono::Duration::hours(1)).to_rfc3339() });
    let (status, made) = app.operator("create_voucher", body).await;
    assert_eq!(status, 200, "{made}");
    let v = made["id"].as_i64().unwrap();
    let private = LocalRedis::start_on(dir.path(), port).await.unwrap();
    app.wait_for_stats("warmed once Redis answers", v, |s| s["redis_stock"] == 7).await;
    assert_eq!(app.grab(&shopper, v).await.0, 200);
    app.stop().await;
    private.stop().await;
}

/// The database's disk fills up while a storm's orders wait to be saved, then has room
/// again: every order a shopper was told is queued is saved, once. Before (a drill,
/// 2026-11-30), a commit that failed on the full disk left its transaction open on its
/// connection, holding SQLite's write lock; the next batches on it were savepoints
/// inside it, acknowledged and never committed: 1,124 of 2,000 orders were lost, and
/// every figure said all was saved. The log is emptied first (`wal_checkpoint`), so the
/// first commit on the full disk must grow it, and fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_under_the_database_loses_no_order() {
    let _watchdog = Watchdog::arm();
    let dir = std::sync::Arc::new(TempDir::new().unwrap());
    let disk = match seckill::testing::disk::Disk::mount(&dir.path().join("disk"), "16m") {
        Ok(disk) => disk,
        Err(e) => return println!("skipped: {e}"),
    };
    let database_url = format!("sqlite://{}/seckill.db", disk.path().display());
    let namespace = format!("t{}", rand::random::<u64>());
    let reuse = crate::support::Reuse { dir: dir.clone(), namespace, database_url };
    let app = TestApp::with(Options { reuse: Some(reuse), ..Options::default() }).await;
    const STOCK: i64 = 200;
    let v = app.create_voucher(STOCK, -5, 3600).await;
    let shoppers = app.sign_in_many("disk", STOCK as usize).await;
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&app.db).await.unwrap();
    let full = disk.fill().unwrap();
    // A sign-up the full disk cannot store is refused: not answered with an id nobody
    // has (as it was, 2026-11-30: most sign-ups in the drill shared one such id).
    let (status, body) =
        app.api.call("sign_up", json!({ "name": "full-disk", "password": PASSWORD }), &[]).await.unwrap();
    if status == 200 {
        let stored: Option<i64> =
            sqlx::query_scalar("SELECT id FROM users WHERE name = 'full-disk'").fetch_optional(&app.db).await.unwrap();
        assert_eq!(stored, body["user_id"].as_i64(), "a sign-up answered 200 is stored: {body}");
    }

    let answers = storm(vec![app.api.clone()], shoppers, v).await;
    let queued = queued(&answers);
    assert_eq!(queued.len() as i64, STOCK, "grabs need Redis only");
    let mut redis = app.redis.clone();
    let stream = app.keys(v).orders;
    wait_until("the worker fails to save on the full disk, and tries again", SETTLED, || {
        let (mut redis, stream) = (redis.clone(), stream.clone());
        async move { most_deliveries(&mut redis, &stream).await >= 2 }
    })
    .await;
    drop(full);

    let books = books_balance(&app.api, &app.db, v, STOCK, &queued).await;
    println!("drill full disk: {books}; deliveries up to {}", most_deliveries(&mut redis, &stream).await);
    app.stop().await;
}

/// On PostgreSQL, a transaction of the server's left idle (its process frozen
/// mid-transaction) is ended within `IDLE_IN_TRANSACTION`, and its locks with it, so
/// the other processes save the sale's orders again. Before (a drill, 2026-11-30), one
/// frozen process held a voucher's row lock for as long as it was stopped. SQLite has
/// one writer at a time and no such sessions: this runs in the PostgreSQL pass.
#[tokio::test]
async fn a_transaction_left_idle_on_postgres_lets_go_of_its_locks() {
    use seckill::server::database::{open, IDLE_IN_TRANSACTION};
    let Some(server) = std::env::var("TEST_POSTGRES_URL").ok().filter(|u| !u.is_empty()) else { return };
    let dir = TempDir::new().unwrap();
    let url = crate::support::fresh_database(dir.path()).await;
    assert!(url.starts_with("postgres"), "{server}");
    let db = open(&url, Duration::from_secs(1)).await.unwrap();
    sqlx::query("CREATE TABLE held (id BIGINT PRIMARY KEY)").execute(&db).await.unwrap();
    sqlx::query("INSERT INTO held VALUES (1)").execute(&db).await.unwrap();
    let mut frozen = db.begin().await.unwrap();
    sqlx::query("SELECT id FROM held WHERE id = 1 FOR UPDATE").execute(&mut *frozen).await.unwrap();
    let began = Instant::now();
    let other = connect_db(&url).await;
    wait_until("the idle transaction's lock is let go", IDLE_IN_TRANSACTION + SOON, || async {
        sqlx::query("SELECT id FROM held WHERE id = 1 FOR UPDATE NOWAIT").execute(&other).await.is_ok()
    })
    .await;
    println!("an idle transaction's lock let go after {:?}", began.elapsed());
    drop(frozen);
}

/// A grab sent with an `Idempotency-Key` while Redis is silent (`CLIENT PAUSE`: up, but
/// answering nothing) is answered `unavailable` within the grab's deadline on Redis, as
/// one without a key is. Before (a drill, 2026-11-30), its key's lookup waited out the
/// 5 s reply timeout first.
#[tokio::test]
async fn a_keyed_grab_waits_on_a_silent_redis_no_longer_than_any_grab() {
    let dir = TempDir::new().unwrap();
    let (private, app) = app_on_own_redis(dir.path()).await;
    let v = app.create_voucher(10, -5, 3600).await;
    let shopper = app.sign_in("silent").await;
    let mut pauser = RedisConn::open(&private.url).await.unwrap();
    let () = redis::cmd("CLIENT").arg("PAUSE").arg(6_000).arg("ALL").query_async(&mut pauser).await.unwrap();
    // Paused once Redis stops answering another connection's PING.
    let probe = RedisConn::open(&private.url).await.unwrap();
    wait_until("Redis is silent", SOON, || {
        let mut probe = probe.clone();
        async move {
            let ping = redis::cmd("PING");
            tokio::time::timeout(Duration::from_millis(200), ping.query_async::<String>(&mut probe)).await.is_err()
        }
    })
    .await;
    let asked = Instant::now();
    let headers = [("cookie", shopper.cookie.as_str()), ("idempotency-key", "silent-1")];
    let (status, body) = app.call("grab", json!({ "voucher_id": v }), &headers).await;
    let waited = asked.elapsed();
    assert_eq!((status.as_u16(), code(&body)), (503, "unavailable"), "{body}");
    // 2 s for the round trip on a loaded machine (as the other drills allow), still
    // short of the 5 s reply timeout the lookup waited out before.
    let bound = seckill::testing::REDIS_DEADLINE + Duration::from_secs(2);
    assert!(waited < bound, "a keyed grab waited {waited:?}");
    app.stop().await;
    private.stop().await;
}

/// While the database cannot write, a worker's batch waits and the outage is logged
/// once (then every 30 s, `backend::outage`), not at each try. Before (a drill,
/// 2026-11-30), every try of a batch the database could not write logged a line, 0.1
/// to 1 s apart for every sale, and then tried each of its orders alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_cannot_write_is_not_logged_at_every_try() {
    let _watchdog = Watchdog::arm();
    let app = TestApp::with(Options::default().with(|c| {
        c.worker_name = Some("quiet".into());
        c.db_busy_ms = 200;
    }))
    .await;
    let v = app.create_voucher(20, -5, 3600).await;
    let shoppers = app.sign_in_many("quiet", 6).await;
    let stream = SaleKeys::new(&app.namespace, v).orders;
    let mut blocker = hold_write_lock(&app.database_url, "vouchers").await;
    let answers = app.grab_all(shoppers.iter(), v, shoppers.len()).await;
    assert!(answers.iter().all(|(_, status, _)| *status == 200), "{answers:?}");
    let mut redis = app.redis.clone();
    wait_until("the worker read orders it cannot write", SETTLED, || {
        let (mut redis, stream) = (redis.clone(), stream.clone());
        async move { pending_on(&mut redis, &stream, "quiet").await > 0 }
    })
    .await;
    // It tries again the orders it read (and reads no others until they are saved):
    // it is handed the others too, so that it tries all six as one batch.
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(GROUP)
        .arg("drill")
        .arg("COUNT")
        .arg(100)
        .arg("STREAMS")
        .arg(&stream)
        .arg(">")
        .query_async(&mut redis)
        .await
        .unwrap();
    let taken: StreamPendingCountReply = redis::cmd("XPENDING")
        .arg(&stream)
        .arg(GROUP)
        .arg("-")
        .arg("+")
        .arg(100)
        .arg("drill")
        .query_async(&mut redis)
        .await
        .unwrap();
    let ids: Vec<&str> = taken.ids.iter().map(|p| p.id.as_str()).collect();
    if !ids.is_empty() {
        let _: redis::Value = redis::cmd("XCLAIM")
            .arg(&stream)
            .arg(GROUP)
            .arg("quiet")
            .arg(0)
            .arg(&ids)
            .query_async(&mut redis)
            .await
            .unwrap();
    }
    let _: i64 = redis::cmd("XGROUP")
        .arg("DELCONSUMER")
        .arg(&stream)
        .arg(GROUP)
        .arg("drill")
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(pending_on(&mut redis, &stream, "quiet").await, 6, "the worker holds every order");
    wait_until("the worker tried the six as one batch twice", SETTLED, || {
        let (mut redis, stream) = (redis.clone(), stream.clone());
        async move { fewest_deliveries(&mut redis, &stream).await >= 4 }
    })
    .await;
    // The outage's first line, and no line per try.
    let said = logs::lines_with(&[&stream]);
    assert_eq!(said.len(), 1, "{said:?}");
    sqlx::query("ROLLBACK").execute(&mut blocker).await.unwrap();
    app.wait_for_stats("every order saved", v, |s| s["persisted"] == 6 && s["pending"] == 0).await;
}

/// The fewest times any pending entry of the group was delivered.
async fn fewest_deliveries(redis: &mut RedisConn, stream: &str) -> usize {
    deliveries(redis, stream).await.into_iter().min().unwrap_or(0)
}

/// While the database cannot be read, the worker's listing of live sales (every half
/// second) says so once, then every 30 s (`backend::outage`). Before (a drill,
/// 2026-11-30), it logged every half second. The database refuses here because the
/// table is gone for a moment: the same failure, on either engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_cannot_be_read_is_not_logged_at_every_listing() {
    let _watchdog = Watchdog::arm();
    let app = TestApp::with(Options::default().with(|c| c.worker_name = Some("lister".into()))).await;
    let listing = "worker lister: listing live vouchers";
    let db = connect_db(&app.database_url).await;
    sqlx::query("ALTER TABLE vouchers RENAME TO vouchers_away").execute(&db).await.unwrap();
    wait_until("the worker says it cannot list", SETTLED, || async { !logs::lines_with(&[listing]).is_empty() }).await;
    // About six listings in 3 s: a line each, before (a machine too busy to list
    // again within them would let the old code pass, never fail the new).
    let more = tokio::time::timeout(Duration::from_secs(3), async {
        while logs::lines_with(&[listing]).len() < 2 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let said_again = more.await.is_ok();
    sqlx::query("ALTER TABLE vouchers_away RENAME TO vouchers").execute(&db).await.unwrap();
    assert!(!said_again, "said again within 3 s: {:?}", logs::lines_with(&[listing]));
}
