//! The live feed and the cross-process sold-out broadcast.

use crate::support::{code, wait_until, Feed, Options, Shopper, TestApp, ADMIN_TOKEN, SOON};
use futures::{stream, StreamExt};
use redis::AsyncCommands;
use seckill::{server::local_redis::LocalRedis, testing::RedisConn};
use serde_json::{json, Value};
use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

fn voucher_in(frame: &Value, id: i64) -> Option<Value> {
    frame["vouchers"].as_array()?.iter().find(|v| v["voucher_id"] == id).cloned()
}

#[tokio::test]
async fn admin_feed_streams_numbers_and_pushes_sold_out_at_once() {
    let app = TestApp::spawn().await;
    let (status, body) = app.call("list_vouchers", json!({}), &[]).await;
    assert_eq!(status, 200, "{body}");
    let anonymous = app.http.get(format!("{}/api/live", app.base)).send().await.unwrap();
    assert_eq!(anonymous.status(), 401, "the operator's feed needs the token");

    let v = app.create_voucher(2, -5, 3600).await;
    let mut feed = Feed::open(&app, false).await;
    let hello = feed.next(SOON).await;
    assert_eq!(hello["type"], "hello");
    let snap = feed.until(SOON, |f| f["type"] == "snapshot" && voucher_in(f, v).is_some()).await;
    let numbers = voucher_in(&snap, v).unwrap();
    assert_eq!((numbers["total"].as_i64(), numbers["stock"].as_i64()), (Some(2), Some(2)));

    let mut shop = Feed::open(&app, true).await;
    for name in ["lf1", "lf2"] {
        let s = app.sign_in(name).await;
        assert_eq!(app.grab(&s, v).await.0, 200);
    }
    let sold = feed.until(SOON, |f| f["type"] == "event" && f["kind"] == "sold_out").await;
    assert_eq!(sold["voucher_id"], v);
    let sold = shop.until(SOON, |f| f["type"] == "event").await;
    assert_eq!((sold["kind"].as_str(), sold["voucher_id"].as_i64()), (Some("sold_out"), Some(v)));
    let stock = shop.until(SOON, |f| f["type"] == "stock" && voucher_in(f, v).is_some_and(|n| n["stock"] == 0)).await;
    let mine = voucher_in(&stock, v).unwrap();
    assert_eq!(mine["stock"], 0);
    assert!(mine.get("pending").is_none(), "shoppers see stock only: {mine}");

    let done =
        feed.until(SOON, |f| f["type"] == "snapshot" && voucher_in(f, v).is_some_and(|n| n["persisted"] == 2)).await;
    let n = voucher_in(&done, v).unwrap();
    assert_eq!((n["stock"].as_i64(), n["granted"].as_i64(), n["dead_letters"].as_i64()), (Some(0), Some(2), Some(0)));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_share_one_sale_and_the_sold_out_broadcast() {
    let a = TestApp::spawn().await;
    let b = TestApp::with(a.restart_options().with(|c| c.sold_out_ttl_ms = 600_000)).await;
    // Made first: creating a sale moves the sale-change count, and each process clears
    // its sold-out flags when its follower (a few reads a second) sees it move. Made
    // here, long before it sells out, the follower cannot clear the flag the broadcast
    // sets.
    let w = a.create_voucher(1, -5, 3600).await;

    // A storm split across both processes: exact stock, one per user.
    let v = a.create_voucher(60, -5, 3600).await;
    let shoppers: Vec<Shopper> = a.sign_in_many("two", 300).await;
    let answers: Vec<(i64, u16)> = stream::iter(shoppers.iter().enumerate())
        .map(|(i, s)| {
            let app = if i % 2 == 0 { &a } else { &b };
            async move { (s.user_id, app.grab(s, v).await.0.as_u16()) }
        })
        .buffer_unordered(100)
        .collect()
        .await;
    let winners: HashSet<i64> = answers.iter().filter(|(_, st)| *st == 200).map(|(u, _)| *u).collect();
    assert_eq!(winners.len(), 60);
    let stats = a.wait_for_stats("persisted", v, |s| s["persisted"] == 60 && s["pending"] == 0).await;
    assert_eq!((stats["redis_stock"].as_i64(), stats["granted"].as_i64()), (Some(0), Some(60)));
    let mut redis = a.redis.clone();
    let orders = a.keys(v).orders;
    crate::support::wait_until("both workers read through the one group", SOON, || {
        let (mut redis, orders) = (redis.clone(), orders.clone());
        async move {
            let consumers: Vec<redis::Value> =
                redis::cmd("XINFO").arg("CONSUMERS").arg(&orders).arg("persist").query_async(&mut redis).await.unwrap();
            consumers.len() == 2
        }
    })
    .await;

    // A sale sold out through A is refused by B locally, without asking Redis.
    let last = a.sign_in("last-buyer").await;
    let late = b.sign_in("late").await;
    let sold_at = Instant::now();
    assert_eq!(a.grab(&last, w).await.0, 200);
    b.wait_for_stats("B flagged", w, |s| s["sold_out_flag"] == true).await;
    println!("sold-out broadcast reached the other process in {:?}", sold_at.elapsed());
    let refused_in_redis: i64 = redis.get(b.keys(w).refused).await.unwrap_or(0);
    let (status, body) = b.grab(&late, w).await;
    assert_eq!((status.as_u16(), code(&body)), (409, "sold_out"));
    assert_eq!(b.stats(w).await["refused_locally"], 1);
    let after: i64 = redis.get(b.keys(w).refused).await.unwrap_or(0);
    assert_eq!(after, refused_in_redis, "the refusal never reached the gate");

    // Both dashboards are live.
    for app in [&a, &b] {
        let mut feed = Feed::open(app, false).await;
        feed.until(SOON, |f| f["type"] == "snapshot" && voucher_in(f, w).is_some()).await;
    }
    b.stop().await;
    a.stop().await;
}

/// Redis commands per snapshot over a window: Redis's own command counter, divided by
/// the snapshots the sampler took meanwhile (those `feed` got, by their time: frames
/// sent before the window and read late are not counted). Per snapshot, not per
/// second: a loaded machine delays the sampler's rounds, not what each round costs.
async fn commands_per_snapshot(redis: &mut RedisConn, feed: &mut Feed, window: Duration) -> f64 {
    async fn total(redis: &mut RedisConn) -> f64 {
        let info: String = redis::cmd("INFO").arg("stats").query_async(redis).await.unwrap();
        let line = info.lines().find(|l| l.starts_with("total_commands_processed:")).unwrap();
        line.split(':').nth(1).unwrap().trim().parse().unwrap()
    }
    let before = total(redis).await;
    let started_ms = chrono::Utc::now().timestamp_millis();
    let end = Instant::now() + window;
    let mut snapshots = 0.0;
    while Instant::now() < end {
        let frame = feed.next(SOON).await;
        if frame["type"] == "snapshot" && frame["at_ms"].as_i64() >= Some(started_ms) {
            snapshots += 1.0;
        }
    }
    // Less the two INFO commands that measure.
    (total(redis).await - before - 2.0) / snapshots
}

#[tokio::test]
async fn the_sampler_costs_the_same_for_one_viewer_or_forty() {
    // A Redis of this test's own, so its command count is ours alone; no worker, whose
    // idle reads of the streams would count too.
    let dir = tempfile::TempDir::new().unwrap();
    let private = LocalRedis::start(dir.path()).await.unwrap();
    let app = TestApp::with(Options::default().with(|c| {
        c.redis_url = Some(private.url.clone());
        c.worker = false;
    }))
    .await;
    for stock in [5, 7, 9] {
        app.create_voucher(stock, -5, 3600).await;
    }
    let mut redis = RedisConn::open(&private.url).await.unwrap();

    let mut one = Feed::open(&app, false).await;
    one.until(SOON, |f| f["type"] == "snapshot").await;
    let with_one = commands_per_snapshot(&mut redis, &mut one, Duration::from_secs(2)).await;

    let mut many = Vec::new();
    for i in 0..40 {
        let mut f = Feed::open(&app, i % 2 == 0).await;
        f.next(SOON).await;
        many.push(f);
    }
    let with_forty = commands_per_snapshot(&mut redis, &mut one, Duration::from_secs(2)).await;
    println!("redis commands per snapshot: {with_one:.1} with 1 viewer, {with_forty:.1} with 41");
    assert!(with_one > 0.0, "the sampler reads Redis");
    assert!(with_forty <= with_one * 1.5 + 1.0, "viewers must not multiply Redis load: {with_one} vs {with_forty}");
    drop((one, many));
    app.stop().await;
    private.stop().await;
}

#[tokio::test]
async fn a_dead_letter_restocks_and_clears_other_processes_flags() {
    // A serves shoppers without a worker; its only order will never persist.
    // Flags outlive the test, so only the restock event can clear one.
    let a = TestApp::with(Options::default().with(|c| {
        c.worker = false;
        c.sold_out_ttl_ms = 600_000;
    }))
    .await;
    let v = a.create_voucher(1, -5, 3600).await;
    let ghost = a.sign_in("ghost").await;
    assert_eq!(a.grab(&ghost, v).await.0, 200);
    sqlx::query("DELETE FROM users WHERE id = $1").bind(ghost.user_id).execute(&a.db).await.unwrap();
    let sam = a.sign_in("sam").await;
    // The gate's answer flags the sale here. This process's follower of the
    // sale-change count clears its flags once when it sees the sale's creation, a
    // fraction of a second late on a busy machine: asked again until the flag holds.
    let deadline = Instant::now() + SOON;
    loop {
        let (status, body) = a.grab(&sam, v).await;
        assert_eq!((status.as_u16(), code(&body)), (409, "sold_out"));
        if a.stats(v).await["sold_out_flag"] == true {
            break;
        }
        assert!(Instant::now() < deadline, "the gate's sold_out never flagged the sale");
    }
    let mut feed = Feed::open(&a, false).await;

    // C's worker gives up on the order: the unit comes back and every process hears it.
    let c = TestApp::with(a.restart_options().with(|c| {
        c.claim_idle_ms = 100;
        c.max_deliveries = 2;
    }))
    .await;
    let mut heard = HashSet::new();
    while heard.len() < 2 {
        let e = feed.until(SOON, |f| f["type"] == "event" && f["voucher_id"] == v).await;
        let kind = e["kind"].as_str().unwrap().to_owned();
        assert!(["dead_lettered", "restocked", "sold_out"].contains(&kind.as_str()), "{e}");
        if kind != "sold_out" {
            heard.insert(kind);
        }
    }
    let stats = a.stats(v).await;
    assert_eq!(stats["sold_out_flag"], false, "the restock event cleared the flag: {stats}");
    assert_eq!(stats["redis_stock"], 1);
    assert_eq!(a.grab(&sam, v).await.0, 200, "the unit given back can be bought");
    drop(feed);
    c.stop().await;
    a.stop().await;
}

/// Operators' boards have a reserve of their own (issue 53): shop pages that fill the
/// feed caps, in total and from the operator's own address, leave the board opening.
/// Before, they shared one cap and the board answered 503.
#[tokio::test]
async fn shop_feeds_never_keep_an_operators_board_closed() {
    let app = TestApp::with(Options::default().with(|c| (c.max_feeds, c.max_feeds_per_address) = (2, 2))).await;
    let _shop = [Feed::open(&app, true).await, Feed::open(&app, true).await];
    let res = app.http.get(format!("{}/api/live?view=shop", app.base)).send().await.unwrap();
    assert_eq!(res.status(), 503, "the shop feeds are full");
    let mut board = Feed::open(&app, false).await;
    assert!(board.next(SOON).await.is_object(), "the board opens and speaks");
}

/// A feed ends when its lifetime is up (so feeds spread over processes added since),
/// whole: its answer completes, and its place comes back for the reconnect.
#[tokio::test]
async fn a_feed_ends_when_its_lifetime_is_up_and_gives_its_place_back() {
    let app =
        TestApp::with(Options::default().with(|c| (c.feed_lifetime_ms, c.max_feeds_per_address) = (300, 1))).await;
    let open = |shop: bool| {
        let url = format!("{}/api/live{}", app.base, if shop { "?view=shop" } else { "" });
        app.http.get(url).header("authorization", format!("Bearer {ADMIN_TOKEN}")).send()
    };
    for shop in [true, false] {
        let res = open(shop).await.unwrap();
        assert_eq!(res.status(), 200, "the feed opens (shop: {shop})");
        let body = tokio::time::timeout(SOON, res.text()).await.expect("the feed ends").unwrap();
        assert!(body.contains("data:"), "it spoke first: {body}");
    }
    // One shop feed per address: the reconnect finds the ended feed's place free.
    wait_until("the ended feed's place comes back", SOON, || async { open(true).await.unwrap().status() == 200 }).await;
    app.stop().await;
}

/// Live feeds are capped per address (503 rather than running out of descriptors),
/// a closed feed gives its place back, and a thousand idle sockets do not stop grabs.
#[tokio::test]
async fn feed_caps_and_idle_sockets_leave_grabs_alone() {
    let app = TestApp::with(Options::default().with(|c| c.max_feeds_per_address = 2)).await;
    let first = Feed::open(&app, true).await;
    let _second = Feed::open(&app, true).await;
    let shop_feed = format!("{}/api/live?view=shop", app.base);
    let res = app.http.get(&shop_feed).send().await.unwrap();
    assert_eq!(res.status(), 503);
    assert_eq!(code(&res.json::<Value>().await.unwrap()), "unavailable");
    drop(first);
    // The server notices a closed feed at its next frame (4 a second).
    wait_until("a closed feed gives its place back", SOON, || {
        let (http, url) = (app.http.clone(), shop_feed.clone());
        async move { http.get(&url).send().await.is_ok_and(|r| r.status() == 200) }
    })
    .await;

    let addr = app.base.trim_start_matches("http://").to_owned();
    let mut idle = Vec::new();
    for _ in 0..1000 {
        idle.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    let v = app.create_voucher(5, -5, 3600).await;
    let ann = app.sign_in("ann").await;
    let (status, body) = app.grab(&ann, v).await;
    assert_eq!(status, 200, "{body}");
    drop(idle);
    app.stop().await;
}

/// At most `max_requests` are served at once: one more answers 503 `unavailable` at
/// once rather than queueing, a live feed (which stays open) takes no slot, and a
/// slot given back serves again.
#[tokio::test]
async fn requests_over_the_cap_answer_503_at_once() {
    let app = TestApp::with(Options::default().with(|c| c.max_requests = 1)).await;
    let healthz = format!("{}/healthz", app.base);
    let status = || async { app.http.get(&healthz).send().await.unwrap().status() };
    assert_eq!(status().await, 200);

    let holder = crate::support::hold_a_slot(&app).await;
    let refused = app.http.get(&healthz).send().await.unwrap();
    assert_eq!(refused.status(), 503, "over the cap");
    assert_eq!(code(&refused.json::<Value>().await.unwrap()), "unavailable");
    let mut feed = Feed::open(&app, true).await;
    assert!(feed.next(SOON).await.is_object(), "the feed is served with the slot taken");

    // The server sees the holder's connection close at once (its body read fails).
    drop(holder);
    wait_until("the slot is free again", SOON, || async { status().await == 200 }).await;
    app.stop().await;
}

/// One address holds at most its share of the requests served at once (an eighth of
/// the cap, here: at least its second's burst): past it, its own requests answer 429
/// while another address is served. An attack (2026-11-30): one address's bodies sent
/// a byte at a time held 300 of 300 places for the request timeout, and every other
/// caller answered 503.
#[tokio::test]
async fn one_address_holds_no_more_than_its_share_of_the_requests_served() {
    let app = TestApp::with(Options::default().with(|c| {
        c.max_requests = 48;
        c.rate_per_address = 3;
    }))
    .await;
    let healthz = format!("{}/healthz", app.base);
    let status = |client: reqwest::Client| {
        let healthz = healthz.clone();
        async move { client.get(&healthz).send().await.unwrap().status().as_u16() }
    };
    let mut held = Vec::new();
    for _ in 0..6 {
        held.push(crate::support::hold_a_slot_from(&app, 5).await);
    }
    let refused = crate::support::client_from(5).get(&healthz).send().await.unwrap();
    assert_eq!(refused.status(), 429, "the address's seventh request in flight");
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(code(&refused.json::<Value>().await.unwrap()), "rate_limited");
    assert_eq!(status(crate::support::client_from(6)).await, 200, "another address is served");
    assert_eq!(status(app.http.clone()).await, 200, "and another");

    drop(held);
    let served = || async { status(crate::support::client_from(5)).await == 200 };
    wait_until("the address's share is free again", SOON, served).await;
    app.stop().await;
}

/// A client that never finishes its headers, one that sends nothing, and a kept-alive
/// connection left idle are all closed after the header timeout, while grabs go on; a
/// body that never finishes answers 503 after the request timeout.
#[tokio::test]
async fn slow_and_idle_connections_are_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // The request timeout bounds the test's own calls too: 2 s (a grab's own deadline on
    // Redis) is far more than they take on a loaded machine, and short to wait for.
    let app = TestApp::with(Options::default().with(|c| {
        c.header_timeout_ms = 300;
        c.request_timeout_ms = 2_000;
    }))
    .await;
    // The test's calls go on connections of their own: a kept-alive one idle for the
    // header timeout is closed by the server, maybe just as the client reuses it.
    let api = seckill::client::ApiClient::new(&app.base, ADMIN_TOKEN, 0);
    let addr = app.base.trim_start_matches("http://").to_owned();
    let mut silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"POST /api/grab HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: app").await.unwrap();
    let mut kept = tokio::net::TcpStream::connect(&addr).await.unwrap();
    kept.write_all(b"GET /admin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();

    let mut trickle = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = "POST /api/sign_in HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n";
    trickle.write_all(format!("{head}{{\"name\":").as_bytes()).await.unwrap();

    let now = chrono::Utc::now();
    let v = api.create_voucher("Idle", 5, now - chrono::Duration::seconds(5), now + chrono::Duration::hours(1));
    let v = v.await.unwrap();
    let ann = api.shopper("ann", crate::support::PASSWORD).await.unwrap();
    assert_eq!(api.grab(&ann, v).await.unwrap().0, 200);

    // Answered 503 once the request timeout (2 s) has passed; 8 s more for a loaded machine.
    let mut answer = vec![0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(10), trickle.read(&mut answer)).await;
    let read = read.expect("a body that never finishes is answered").unwrap();
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("unavailable"), "{answer}");

    for (what, socket) in [("silent", &mut silent), ("slow", &mut slow), ("kept-alive", &mut kept)] {
        let mut buf = vec![0u8; 64 * 1024];
        let closed = tokio::time::timeout(SOON, async {
            loop {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => continue, // the kept-alive one's page
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "the {what} connection is still open {SOON:?} later");
    }
    app.stop().await;
}

/// `server_time` and the shoppers' feed both carry the gate's clock (Redis TIME), the
/// clock the page counts down by whatever the device's clock says.
#[tokio::test]
async fn server_time_and_the_feed_carry_the_gates_clock() {
    let app = TestApp::spawn().await;
    let redis_ms = || async {
        let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut app.redis.clone()).await.unwrap();
        secs * 1000 + micros / 1000
    };
    let before = redis_ms().await;
    let (status, body) = app.call("server_time", json!({}), &[]).await;
    let after = redis_ms().await;
    assert_eq!(status, 200, "{body}");
    let now_ms = body["now_ms"].as_i64().unwrap();
    assert!((before..=after).contains(&now_ms), "{before} ≤ {now_ms} ≤ {after}");

    let v = app.create_voucher(1, -5, 3600).await;
    let mut shop = Feed::open(&app, true).await;
    // A frame sampled after the voucher was made (the first may be an older one).
    let frame = shop.until(SOON, |f| f["type"] == "stock" && voucher_in(f, v).is_some()).await;
    let fed = frame["now_ms"].as_i64().unwrap();
    assert!(fed >= before && fed <= redis_ms().await, "{frame}");
    app.stop().await;
}

/// The shoppers' feed carries each sale's window as the gate holds it, so a start an
/// operator moved reaches every open page at the next frame, not at the next list
/// refresh (a card would open its Grab button at the old start).
#[tokio::test]
async fn the_feed_carries_a_moved_start() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, 3600, 7200).await;
    let later = chrono::Utc::now() + chrono::Duration::seconds(5400);
    app.admin("update_voucher", json!({ "voucher_id": v, "begins_at": later.to_rfc3339() })).await;
    let mut shop = Feed::open(&app, true).await;
    let want = later.timestamp_millis();
    let frame = shop.until(SOON, |f| voucher_in(f, v).is_some_and(|x| x["begins_at_ms"] == want)).await;
    assert!(voucher_in(&frame, v).unwrap()["ends_at_ms"].as_i64().unwrap() > want);
    app.stop().await;
}

/// The board's lag (entries no worker was handed yet) is counted from the stream's
/// and the group's ids, so it stays right when Redis's count of the entries the group
/// read is wrong (as after a failover, where Redis 7.0's own `lag` stays wrong: here
/// the group is moved past one entry while Redis is told it read none). Before, the
/// board showed Redis's figure.
#[tokio::test]
async fn the_lag_counts_the_entries_no_worker_was_handed() {
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let v = app.create_voucher(10, -5, 3600).await;
    for s in &app.sign_in_many("lag", 3).await {
        assert_eq!(app.grab(s, v).await.0, 200);
    }
    assert_eq!(app.stats(v).await["lag"], 3, "nothing read yet");
    let keys = app.keys(v);
    let mut redis = app.redis.clone();
    let first: redis::streams::StreamRangeReply = redis.xrange_count(&keys.orders, "-", "+", 1).await.unwrap();
    let () = redis::cmd("XGROUP")
        .arg("SETID")
        .arg(&keys.orders)
        .arg(seckill::testing::GROUP)
        .arg(&first.ids[0].id)
        .arg("ENTRIESREAD")
        .arg(0)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(app.stats(v).await["lag"], 2, "the entries after the one the group is at");
    app.stop().await;
}

/// Reads the feed for `span`, every frame within `gap` of the one before: a sampler
/// that waits on a store that does not answer leaves a gap, and fails the test.
async fn frames_keep_coming(feed: &mut Feed, span: Duration, gap: Duration) -> Vec<Value> {
    let started = Instant::now();
    let mut snapshots = Vec::new();
    while started.elapsed() < span {
        let frame = feed.next(gap).await;
        if frame["type"] == "snapshot" {
            snapshots.push(frame);
        }
    }
    snapshots
}

/// The database does not answer (on PostgreSQL the vouchers table locked against
/// reads; on SQLite, whose reads no writer blocks, every pooled connection held by a
/// write waiting for another writer's lock): the operator's feed goes on, its Redis
/// figures fresh, and says since when its database figures are. Before, the
/// sampler's round waited on the database and no snapshot went out until it answered:
/// the board stood still, marked live, while its queue grew (a review, 2026-12-02).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_goes_on_while_the_database_does_not_answer() {
    use sqlx::Connection;
    let app = TestApp::with(Options::default().with(|c| c.db_busy_ms = 120_000)).await;
    let v = app.create_voucher(5, -5, 3600).await;
    let mut feed = Feed::open(&app, false).await;
    feed.until(SOON, |f| f["type"] == "snapshot" && voucher_in(f, v).is_some()).await;

    let mut blocker = sqlx::AnyConnection::connect(&app.database_url).await.unwrap();
    let lock = if app.database_url.starts_with("postgres") {
        "BEGIN; LOCK TABLE vouchers IN ACCESS EXCLUSIVE MODE"
    } else {
        "BEGIN IMMEDIATE"
    };
    sqlx::raw_sql(lock).execute(&mut blocker).await.unwrap();
    // Writes that wait for the lock, each holding a pooled connection meanwhile.
    let writers: Vec<_> = (0..12)
        .map(|i| {
            let api = app.api.clone();
            let now = chrono::Utc::now();
            tokio::spawn(async move {
                api.create_voucher(&format!("Waiting {i}"), 1, now, now + chrono::Duration::hours(1)).await
            })
        })
        .collect();
    let snapshots = frames_keep_coming(&mut feed, Duration::from_secs(8), Duration::from_secs(5)).await;
    let last = snapshots.last().expect("snapshots");
    let at = last["at_ms"].as_i64().unwrap();
    assert!(last["database_at_ms"].as_i64().unwrap() <= at - 2_000, "the database's figures said to be behind: {last}");
    let sale = voucher_in(last, v).expect("the sale still shown");
    assert_eq!(sale["redis_at_ms"], at, "Redis's figures fresh: {sale}");
    let metrics = app.api.http.get(format!("{}/metrics", app.base)).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    let metrics = metrics.text().await.unwrap();
    let age = metrics.lines().find_map(|l| l.strip_prefix("seckill_live_figures_age_ms{store=\"database\"} "));
    assert!(age.and_then(|a| a.parse::<i64>().ok()).is_some_and(|a| a >= 2_000), "{metrics}");

    sqlx::query("ROLLBACK").execute(&mut blocker).await.unwrap();
    for writer in writers {
        writer.await.unwrap().unwrap();
    }
    app.stop().await;
}

/// Redis does not answer (killed): the operator's feed goes on, each sale shown with
/// its database figures and what Redis showed last, and says since when its Redis
/// figures are. Before, a round in which no bucket answered sent nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_goes_on_while_redis_does_not_answer() {
    let dir = tempfile::TempDir::new().unwrap();
    let private = LocalRedis::start_steady(dir.path()).await.unwrap();
    let port = private.port;
    let app = TestApp::with(Options::default().with(|c| c.redis_url = Some(private.url.clone()))).await;
    let v = app.create_voucher(5, -5, 3600).await;
    let mut feed = Feed::open(&app, false).await;
    feed.until(SOON, |f| f["type"] == "snapshot" && voucher_in(f, v).is_some_and(|n| n["stock"] == 5)).await;

    private.crash().await;
    let snapshots = frames_keep_coming(&mut feed, Duration::from_secs(8), Duration::from_secs(5)).await;
    let last = snapshots.last().expect("snapshots");
    let at = last["at_ms"].as_i64().unwrap();
    assert_eq!(last["database_at_ms"], at, "the database's figures fresh: {last}");
    let sale = voucher_in(last, v).expect("the sale still shown");
    assert_eq!((&sale["total"], &sale["stock"]), (&json!(5), &json!(5)), "what Redis showed last: {sale}");
    assert!(sale["redis_at_ms"].as_i64().unwrap() <= at - 2_000, "Redis's figures said to be behind: {sale}");

    let back = LocalRedis::start_on(dir.path(), port).await.unwrap();
    app.stop().await;
    back.stop().await;
}
