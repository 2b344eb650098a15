//! Crashes between reading and acknowledging delay orders, never lose or double them.

use crate::support::{wait_until, Options, Shopper, TestApp, SETTLED, SOON};
use redis::{
    streams::{StreamReadOptions, StreamReadReply},
    AsyncCommands,
};
use seckill::testing::{bucket_of, ledger, settle, store, vouchers, warm::warm, Fate, OrderMsg, GROUP};
/// Time to pay for orders these tests persist by hand: longer than any test.
const PAY: i64 = 3_600_000;

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    },
};

/// How many rows of `table` (`orders`, `dead_letters`) belong to sale `v`.
async fn rows_of_sale(app: &TestApp, table: &str, v: i64) -> i64 {
    let sql = format!("SELECT COUNT(*) FROM {table} WHERE voucher_id = $1");
    sqlx::query_scalar(&sql).bind(v).fetch_one(&app.db).await.unwrap()
}

/// Reads `count` new entries as `consumer` and does not acknowledge them, like a
/// worker killed mid-batch. Returns the messages it read.
async fn read_and_crash(app: &TestApp, voucher: i64, consumer: &str, count: usize) -> Vec<OrderMsg> {
    let mut redis = app.redis.clone();
    let opts = StreamReadOptions::default().group(GROUP, consumer).count(count);
    let reply: StreamReadReply = redis.xread_options(&[app.keys(voucher).orders], &[">"], &opts).await.unwrap();
    let entries = &reply.keys[0].ids;
    assert_eq!(entries.len(), count);
    entries
        .iter()
        .map(|e| OrderMsg {
            voucher_id: e.get::<String>("voucher").unwrap().parse().unwrap(),
            order_id: e.get::<String>("order").unwrap().parse().unwrap(),
            user_id: e.get::<String>("user").unwrap().parse().unwrap(),
            price: e.get::<String>("price").and_then(|p| p.parse().ok()),
        })
        .collect()
}

#[tokio::test]
async fn orders_read_but_not_acked_are_persisted_once_after_restart() {
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let v = app.create_voucher(10, -5, 3600).await;
    for i in 0..6 {
        let s = app.sign_in(&format!("crash-{i}")).await;
        assert_eq!(app.grab(&s, v).await.0, 200);
    }
    // Worker "w-fixed" read 2 and even committed them, but died before XACK.
    let committed = read_and_crash(&app, v, "w-fixed", 2).await;
    assert_eq!(store::persist(&app.db, &committed, PAY).await.unwrap().len(), 2);
    // Worker "w-gone" read 3 and died before writing anything; it never comes back.
    read_and_crash(&app, v, "w-gone", 3).await;
    // One order was never read at all.
    let opts = app.restart_options();
    app.stop().await;

    // The restarted process has the stable name "w-fixed": it drains its own pending
    // list at once (claiming is off: nothing is idle long enough) and reads the rest.
    let app = TestApp::with(opts.clone().with(|c| {
        c.worker_name = Some("w-fixed".into());
        c.claim_idle_ms = 600_000;
    }))
    .await;
    app.wait_for_stats("own pending drained", v, |s| s["persisted"] == 3 && s["pending"] == 3).await;
    let opts = app.restart_options();
    app.stop().await;

    // w-gone never comes back: its entries are claimed once idle.
    let app = TestApp::with(opts.with(|c| c.claim_idle_ms = 300)).await;
    let stats = app.wait_for_stats("6 persisted, none pending", v, |s| s["persisted"] == 6 && s["pending"] == 0).await;
    assert_eq!(stats["redis_stock"], 4);
    assert_eq!(stats["granted"], 6);
    let left: i64 =
        sqlx::query_scalar("SELECT stock_left FROM vouchers WHERE id = $1").bind(v).fetch_one(&app.db).await.unwrap();
    assert_eq!(left, 4, "database stock taken once per order");
    let count = rows_of_sale(&app, "orders", v).await;
    assert_eq!(count, 6);
    let mut redis = app.redis.clone();
    let results: HashMap<String, String> = redis.hgetall(app.keys(v).results).await.unwrap();
    assert!(results.values().all(|r| r.starts_with("success:")), "{results:?}");
    app.stop().await;
}

#[tokio::test]
async fn a_poison_order_is_dead_lettered_and_its_stock_given_back() {
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let v = app.create_voucher(3, -5, 3600).await;
    let ghost = app.sign_in("ghost").await;
    let (status, ticket) = app.grab(&ghost, v).await;
    assert_eq!(status, 200);
    // The user vanishes before the order is persisted: the database will refuse it
    // (foreign key) on every delivery.
    sqlx::query("DELETE FROM users WHERE id = $1").bind(ghost.user_id).execute(&app.db).await.unwrap();
    let opts = app.restart_options();
    app.stop().await;

    let app = TestApp::with(opts.with(|c| {
        c.claim_idle_ms = 100;
        c.max_deliveries = 2;
    }))
    .await;
    let stats = app.wait_for_stats("dead letter", v, |s| s["dead_letters"] == 1 && s["pending"] == 0).await;
    assert_eq!(stats["redis_stock"], 3, "the unit is given back");
    assert_eq!(stats["granted"], 0, "the buyer slot is given back");
    assert_eq!(stats["persisted"], 0);
    let mut redis = app.redis.clone();
    let order_id: i64 = ticket["order_id"].as_str().unwrap().parse().unwrap();
    let result: String = redis.hget(app.keys(v).results, order_id).await.unwrap();
    assert_eq!(result, format!("failed:{}:dead_letter", ghost.user_id));
    app.stop().await;
}

/// An entry the gate did not write for this voucher (malformed, or naming another
/// voucher) is dead-lettered for the operator, never persisted and never dropped
/// silently; the real order behind it is persisted.
#[tokio::test]
async fn foreign_and_malformed_entries_are_dead_lettered() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(5, -5, 3600).await;
    let ann = app.sign_in("ann").await;
    let keys = app.keys(v);
    let mut redis = app.redis.clone();
    let malformed = [("order", "1".to_owned()), ("user", "x".to_owned())];
    let _: String = redis.xadd(&keys.orders, "*", &malformed).await.unwrap();
    let foreign = [("order", "2".to_owned()), ("user", ann.user_id.to_string()), ("voucher", (v + 1000).to_string())];
    let _: String = redis.xadd(&keys.orders, "*", &foreign).await.unwrap();
    assert_eq!(app.grab(&ann, v).await.0, 200);

    let stats = app
        .wait_for_stats("every entry handled", v, |s| {
            s["pending"] == 0 && s["dead_letters"] == 2 && s["persisted"] == 1
        })
        .await;
    assert_eq!(stats["redis_stock"], 4, "a refused entry gives nothing back: it held nothing");
    let dead: redis::streams::StreamRangeReply = redis.xrange_all(&keys.dlq).await.unwrap();
    let reasons: Vec<String> = dead.ids.iter().filter_map(|e| e.get::<String>("reason")).collect();
    assert_eq!(reasons, ["malformed", "foreign voucher"]);
    let ttl: i64 = redis.pttl(&keys.dlq).await.unwrap();
    assert!(ttl > 3_600_000, "the dead letters expire with the sale: {ttl}");
    let orders: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orders").fetch_one(&app.db).await.unwrap();
    assert_eq!(orders, 1);
    app.stop().await;
}

/// An entry naming another voucher, delivered too often (its worker stopped each time
/// before ending it), is dead-lettered on its last try as on its first: never saved,
/// the other voucher's stock untouched. Before, the last try saved it into the voucher
/// it named (a review, 2026-12-02).
#[tokio::test]
async fn a_foreign_entry_delivered_too_often_is_dead_lettered_not_saved() {
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let (v, other) = (app.create_voucher(5, -5, 3600).await, app.create_voucher(5, -5, 3600).await);
    let ann = app.sign_in("foreign-ann").await;
    let orders = app.keys(v).orders;
    let mut redis = app.redis.clone();
    let foreign = [("order", "7".to_owned()), ("user", ann.user_id.to_string()), ("voucher", other.to_string())];
    let id: String = redis.xadd(&orders, "*", &foreign).await.unwrap();
    read_and_crash(&app, v, "stopped", 1).await;
    for _ in 0..3 {
        let claim = redis::cmd("XCLAIM").arg(&orders).arg(GROUP).arg("stopped").arg(0).arg(&id).clone();
        let _: redis::Value = claim.query_async(&mut redis).await.unwrap();
    }
    let opts = app.restart_options();
    app.stop().await;
    let app = TestApp::with(opts.with(|c| (c.claim_idle_ms, c.max_deliveries) = (100, 2))).await;
    app.wait_for_stats("the entry ended", v, |s| s["pending"] == 0 && s["dead_letters"] == 1).await;
    assert_eq!(rows_of_sale(&app, "orders", other).await, 0, "never saved");
    assert_eq!(app.stats(other).await["persisted"], 0, "the other voucher's stock untouched");
    app.stop().await;
}

/// A dead letter racing a late persist of the same order has one winner, decided in
/// the database: each order ends persisted or buried, never both and never neither,
/// and the database's stock counts only the persisted ones.
#[tokio::test]
async fn a_dead_letter_and_a_late_persist_never_both_win() {
    use seckill::testing::compose;

    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let v = app.create_voucher(300, -5, 3600).await;
    let users = app.sign_in_many("race", 200).await;
    // Ids of grabs made now: their payment deadline is ahead (the sweeper leaves them be).
    let now = chrono::Utc::now().timestamp();
    let msgs: Vec<OrderMsg> = users
        .iter()
        .enumerate()
        .map(|(i, u)| OrderMsg { voucher_id: v, order_id: compose(now, i as u32), user_id: u.user_id, price: None })
        .collect();
    let races = msgs.iter().map(|m| {
        let db = app.db.clone();
        async move {
            let (persisted, buried) =
                tokio::join!(store::persist(&db, std::slice::from_ref(m), PAY), store::bury(&db, m, "race"));
            (persisted.unwrap()[0], buried.unwrap())
        }
    });
    let results = futures::future::join_all(races).await;
    let won_by_persist = results.iter().filter(|r| **r == (Fate::Persisted, Fate::Persisted)).count();
    let won_by_burial = results.iter().filter(|r| **r == (Fate::Buried, Fate::Buried)).count();
    println!("race persist vs dead letter: {won_by_persist} persisted, {won_by_burial} buried of {}", results.len());
    assert_eq!(won_by_persist + won_by_burial, results.len(), "every race has one winner: {results:?}");

    let count = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql).fetch_one(&app.db);
    let both = count("SELECT COUNT(*) FROM orders o JOIN dead_letters d ON d.order_id = o.id").await.unwrap();
    assert_eq!(both, 0, "no order both persisted and buried");
    assert_eq!(count("SELECT COUNT(*) FROM orders").await.unwrap(), won_by_persist as i64);
    let left: i64 =
        sqlx::query_scalar("SELECT stock_left FROM vouchers WHERE id = $1").bind(v).fetch_one(&app.db).await.unwrap();
    assert_eq!(left + won_by_persist as i64, 300, "the database's stock counts persisted orders only");
    app.stop().await;
}

/// An order committed after a rebuild, and cancelled before it settled, gives its unit
/// back once (review, 2026-11-29). The rebuilt stock counted its unit as unsold; the
/// cancel's give-back added it again, and settling then left it: Redis held a unit
/// more than the sale had, for good. Now settling takes it, and leaves the slot free.
#[tokio::test]
async fn an_order_cancelled_before_it_settled_after_a_rebuild_gives_its_unit_back_once() {
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let (v, _) = sale_grabbed_by(&app, "cancel-unsettled", 2).await;
    let backend = app.backend();
    let mut redis = app.redis.clone();
    let read = read_and_crash(&app, v, "w-slow", 2).await;
    // Redis loses the voucher while the worker holds both orders.
    let keys = app.keys(v);
    lose_and_rebuild(&app, v).await;
    assert_eq!(redis.get::<_, i64>(&keys.left).await.unwrap(), 10, "the database knew no order");
    // Both commit; the first is cancelled, and its unit given back, before they settle.
    store::persist(&app.db, &read, PAY).await.unwrap();
    assert!(cancel_and_give_back(&app, &read[0]).await, "given back now");
    let entries: Vec<(&str, &OrderMsg)> = read.iter().map(|m| ("0-1", m)).collect();
    assert_eq!(settle(&backend, &mut redis, (v, &keys), i64::MAX / 2, &entries).await.unwrap(), 0);
    let stock: i64 = redis.get(&keys.left).await.unwrap();
    let buyers: HashMap<String, String> = redis.hgetall(&keys.buyers).await.unwrap();
    assert_eq!(stock, 9, "Redis stock + buyers = total: the cancelled order's unit counted once");
    let kept = read[1].user_id.to_string();
    assert_eq!(buyers.keys().collect::<Vec<_>>(), [&kept], "only the order not cancelled holds a slot");
    app.stop().await;
}

/// A rebuild's load that reaches Redis after the rebuild gave up loads nothing (review,
/// 2026-11-29). The rebuild holds the voucher's lock while Redis loads its snapshot;
/// past its deadline it lets the lock go, and a cancel then commits and gives its unit
/// back to a Redis that does not hold the voucher (recorded, nothing to add to). The
/// load, held on a slow link, reached Redis after that: before, it loaded the stale
/// snapshot (the cancelled order live again, its unit lost, the give-back's record
/// wiped), and Redis's books stayed one unit short. Now a load counts only while its
/// rebuild's ticket lives, and the rebuild keeps the lock until the ticket lapsed.
#[tokio::test]
async fn a_rebuild_load_that_reaches_redis_after_its_deadline_loads_nothing() {
    late_load_drill(false).await;
}

/// The same, when the rebuild's caller goes away while the load is on its way (a
/// request past its timeout, a client that hung up: a second review, 2026-11-29).
/// Before, dropping the caller dropped the rebuild's transaction, and the lock with
/// it, while the ticket still held: the late load loaded the stale snapshot. The
/// rebuild now runs on a task of its own, which keeps the lock as long as it must.
#[tokio::test]
async fn a_rebuild_whose_caller_went_away_keeps_the_lock_until_its_load_can_load_nothing() {
    late_load_drill(true).await;
}

/// Redis loses a sale of two saved orders; a process whose link to Redis holds its
/// load rebuilds it (and its caller waits, or goes away once the load is sent); the
/// first shopper cancels as soon as the database lets them; then the held load reaches
/// Redis. Redis must hold the sale as the database does after the cancel.
async fn late_load_drill(caller_goes_away: bool) {
    use crate::support::proxy::HoldingLink;
    use seckill::testing::{Backend, RedisConn};
    let Some(target) = one_node() else { return };
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let (v, _) = sale_grabbed_by(&app, "late-load", 2).await;
    let backend = app.backend();
    let mut redis = app.redis.clone();
    let read = read_and_crash(&app, v, "w-settled", 2).await;
    store::persist(&app.db, &read, PAY).await.unwrap();
    let entries: Vec<(&str, &OrderMsg)> = read.iter().map(|m| ("0-1", m)).collect();
    settle(&backend, &mut redis, (v, &app.keys(v)), i64::MAX / 2, &entries).await.unwrap();
    // Redis loses the voucher.
    let keys = app.keys(v);
    lose_the_sale(&app, v).await;
    let () = redis.del(&keys.given_back).await.unwrap();
    // A process whose link to Redis holds what it sends from its second script call
    // on (the first looks whether Redis holds the voucher; the second loads it)
    // rebuilds the voucher.
    let link = HoldingLink::to(&target, (b"EVALSHA", 2)).await;
    let slow = Backend::new(app.db.clone(), RedisConn::open(link.url()).await.unwrap(), &app.namespace);
    let row = vouchers::get(&app.db, v).await.unwrap().unwrap();
    if caller_goes_away {
        let rebuild = warm(&slow, &row);
        tokio::pin!(rebuild);
        link.drive_until_held(rebuild.as_mut(), "load").await;
        // Its caller goes away with the load on its way.
    } else {
        assert!(warm(&slow, &row).await.is_err(), "the rebuild gives up");
        assert!(link.holding(), "its load is on its way");
    }
    // The first shopper cancels once the lock is free: the database gives the unit back
    // (Redis, which does not hold the sale, has nothing to give it back to).
    assert!(!cancel_and_give_back(&app, &read[0]).await, "Redis does not hold the sale");
    // The held load reaches Redis; a command after it on the same link answers once it ran.
    link.release();
    let _: String = redis::cmd("PING").query_async(&mut slow.redis.clone()).await.unwrap();
    // Redis then holds the sale as the database does now.
    warm(&backend, &row).await.unwrap();
    let stock: i64 = redis.get(&keys.left).await.unwrap();
    let buyers: HashMap<String, String> = redis.hgetall(&keys.buyers).await.unwrap();
    assert_eq!((stock, buyers.len()), (9, 1), "Redis stock + buyers = total, the cancel counted: {buyers:?}");
    app.stop().await;
}

/// A rebuild whose load ran but whose answer was lost: its call, sent again on a new
/// connection, finds the bucket held (by its own load). What its database half wrote
/// stands: its count of rebuilds (a worker committing a batch read from the lost
/// stream then puts it on record) and the withdrawal it voided, which its snapshot
/// loaded as made 0. Before, a bucket found held rolled both back: the withdrawal
/// stayed owed while Redis held it void, so a caller that had made it in Redis before
/// the loss could still record it, units Redis sells again.
#[tokio::test]
async fn a_rebuild_whose_answer_was_lost_keeps_what_it_wrote() {
    let (app, v, withdrawal, private) = a_rebuild_losing_answers(None).await;
    let owed = ledger::owed_changes_of(&app.db, v).await.unwrap();
    assert!(owed.iter().all(|c| c.id != withdrawal), "the voided withdrawal is settled, not owed");
    let stock: i64 = app.redis.clone().get(&app.keys(v).left).await.unwrap();
    let row = vouchers::get(&app.db, v).await.unwrap().unwrap();
    assert_eq!((stock, row.stock_left), (5, 5), "Redis and the database count the same units");
    app.stop().await;
    private.stop().await;
}

/// The same, when Redis does not answer whether the load ran either (each answer to
/// that question is lost too): the load may have run, so the rebuild's count stands.
/// Before, no answer read as "another rebuild loaded it", and the count was rolled
/// back with the rest: a worker committing a batch read from the lost stream would
/// not put it on record, and had it died before settling it, nobody would have.
#[tokio::test]
async fn a_rebuild_that_cannot_learn_whether_its_load_ran_keeps_its_count() {
    let (app, _, _, private) = a_rebuild_losing_answers(Some(b"$10\r\nrebuilt_by\r\n")).await;
    app.stop().await;
    private.stop().await;
}

/// A sale with a withdrawal owed, lost by a Redis of its own and rebuilt through a link
/// that loses the load's answer, and every answer to a send carrying `also_lost`: the
/// rebuild's count of rebuilds stands. The app, the sale, the withdrawal and the Redis.
async fn a_rebuild_losing_answers(
    also_lost: Option<&'static [u8]>,
) -> (TestApp, i64, i64, seckill::server::local_redis::LocalRedis) {
    use crate::support::proxy::LosingLink;
    use seckill::testing::{Backend, RedisConn};
    // A Redis of its own: no other test's `SCRIPT FLUSH` makes the first script call
    // load its script and go again, so the second script call is the load.
    let dir = tempfile::TempDir::new().unwrap();
    let private = seckill::server::local_redis::LocalRedis::start(dir.path()).await.unwrap();
    let target = format!("127.0.0.1:{}", private.port);
    let app = TestApp::with(Options::default().with(|c| {
        c.redis_url = Some(private.url.clone());
        c.worker = false;
        c.sweep_ms = 3_600_000;
    }))
    .await;
    let v = app.create_voucher(5, -5, 3600).await;
    let withdrawal = ledger::owe_withdrawal(&app.db, v, 2).await.unwrap().unwrap();
    lose_the_sale(&app, v).await;
    let rebuilds = || async {
        let count = sqlx::query_scalar::<_, i64>("SELECT rebuilds FROM vouchers WHERE id = $1").bind(v);
        count.fetch_one(&app.db).await.unwrap()
    };
    let before = rebuilds().await;
    // The first script call looks whether Redis holds the bucket; the second loads it.
    let link = LosingLink::to(&target, (b"EVALSHA", 2), also_lost).await;
    let lossy = Backend::new(app.db.clone(), RedisConn::open(link.url()).await.unwrap(), &app.namespace);
    let row = vouchers::get(&app.db, v).await.unwrap().unwrap();
    let answered = warm(&lossy, &row).await;
    assert!(link.lost() >= 1, "the load's answer was lost ({answered:?})");
    assert_eq!(rebuilds().await, before + 1, "the rebuild's count stands ({answered:?})");
    (app, v, withdrawal.id, private)
}

/// Redis loses a voucher while a worker holds orders it has read but not committed.
/// The rebuild reads the database without them; when they commit, settling them takes
/// their units and buyer slots, so Redis never sells more than the stock and none of
/// their buyers can buy again.
#[tokio::test]
async fn orders_committed_after_a_rebuild_take_their_units() {
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let (v, buyers) = sale_grabbed_by(&app, "inflight", 4).await;
    let backend = app.backend();
    let mut redis = app.redis.clone();
    let read = read_and_crash(&app, v, "w-slow", 4).await;
    let (early, late) = read.split_at(1);
    // One order committed and settled before Redis lost the voucher.
    store::persist(&app.db, early, PAY).await.unwrap();
    settle(&backend, &mut redis, (v, &app.keys(v)), i64::MAX / 2, &[("0-1", &early[0])]).await.unwrap();
    let keys = app.keys(v);
    lose_and_rebuild(&app, v).await;
    let rebuilt: i64 = redis.get(&keys.left).await.unwrap();
    assert_eq!(rebuilt, 9, "the database knew one order when Redis was rebuilt");

    // The three in the worker's hands commit after the rebuild, and are settled.
    store::persist(&app.db, late, PAY).await.unwrap();
    let entries: Vec<(&str, &OrderMsg)> = late.iter().map(|m| ("0-1", m)).collect();
    assert_eq!(settle(&backend, &mut redis, (v, &app.keys(v)), i64::MAX / 2, &entries).await.unwrap(), 0);
    let stock: i64 = redis.get(&keys.left).await.unwrap();
    let in_redis: i64 = redis.hlen(&keys.buyers).await.unwrap();
    assert_eq!((stock, in_redis), (6, 4), "Redis stock + buyers = total");
    for s in &buyers {
        let (status, body) = app.grab(s, v).await;
        assert_eq!((status.as_u16(), body["code"].as_str()), (409, Some("already_bought")));
    }
    // Exactly the six units left sell.
    let others = app.sign_in_many("after-rebuild", 8).await;
    let mut granted = 0;
    for s in &others {
        granted += usize::from(app.grab(s, v).await.0 == 200);
    }
    assert_eq!(granted, 6);
    let left: i64 =
        sqlx::query_scalar("SELECT stock_left FROM vouchers WHERE id = $1").bind(v).fetch_one(&app.db).await.unwrap();
    assert_eq!(left, 6, "the database agrees before the last six are persisted");
    app.stop().await;
}

/// The same, when the call that settles them fails (the worker's link to Redis breaks
/// with the call on its way): the worker settles them on its next step. Before, it
/// dropped them, and nobody delivered them again (the rebuilt stream's pending list
/// lacks their entries): Redis counted their units unsold and their shoppers' slots
/// free for good (the second review, 2026-11-29).
#[tokio::test]
async fn orders_committed_after_a_rebuild_whose_settling_failed_are_settled_next_step() {
    use crate::support::proxy::HoldingLink;
    use seckill::testing::Entry;
    let Some(target) = one_node() else { return };
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let (v, buyers) = sale_grabbed_by(&app, "unsettled", 4).await;
    let keys = app.keys(v);
    let opts = StreamReadOptions::default().group(GROUP, "w-cut").count(4);
    let reply: redis::Value = app.redis.clone().xread_options(&[&keys.orders], &[">"], &opts).await.unwrap();
    let entries = Entry::from_read(reply).unwrap();
    assert_eq!(entries.len(), 4);
    lose_and_rebuild(&app, v).await;

    // The worker's link to Redis holds its first script call (the settling) until it breaks.
    let link = HoldingLink::to(&target, (b"EVALSHA", 1)).await;
    let mut saver = saver_through(&link, &app, v, "w-cut").await;
    {
        let handled = saver.handle(entries);
        tokio::pin!(handled);
        link.drive_until_held(handled.as_mut(), "settling").await;
        link.sever();
        assert!(handled.await.is_err(), "the settling failed");
        link.mend();
    }
    let saved = rows_of_sale(&app, "orders", v).await;
    let stock: i64 = app.redis.clone().get(&keys.left).await.unwrap();
    assert_eq!((saved, stock), (4, 10), "committed, not settled");

    // The next step (nothing new read) settles them first.
    saver.handle(Vec::new()).await.unwrap();
    four_settled_of_ten(&app, v, &buyers).await;
    app.stop().await;
}

/// The one Redis's address (`host:port`) a test link leads to; none on a Redis
/// Cluster, whose sale's keys may live on another node (the first pass of `npm test`,
/// on one Redis, runs the tests that need one).
fn one_node() -> Option<String> {
    let target = crate::support::redis_url();
    (!target.contains(',')).then(|| target.trim_start_matches("redis://").trim_end_matches('/').to_owned())
}

/// A sale of ten units whose four `buyers`' orders Redis settled: six units left, four
/// buyers, and none of them may buy again.
async fn four_settled_of_ten(app: &TestApp, v: i64, buyers: &[Shopper]) {
    let (keys, mut redis) = (app.keys(v), app.redis.clone());
    let stock: i64 = redis.get(&keys.left).await.unwrap();
    let in_redis: i64 = redis.hlen(&keys.buyers).await.unwrap();
    assert_eq!((stock, in_redis), (6, 4), "Redis stock + buyers = total");
    for s in buyers {
        let (status, body) = app.grab(s, v).await;
        assert_eq!((status.as_u16(), body["code"].as_str()), (409, Some("already_bought")));
    }
}

/// A worker's saver, for voucher `v`'s stream as `consumer`, whose Redis is reached
/// through `link`.
async fn saver_through(
    link: &crate::support::proxy::HoldingLink,
    app: &TestApp,
    v: i64,
    consumer: &str,
) -> seckill::testing::Saver {
    use seckill::testing::{RedisConn, Saver, WorkerSettings};
    let settings = WorkerSettings {
        consumer: consumer.into(),
        named: Default::default(),
        batch_size: 4,
        poll_ms: 100,
        claim_idle_ms: 60_000,
        max_deliveries: 3,
        pay_timeout_ms: PAY,
    };
    let redis = RedisConn::open(link.url()).await.unwrap();
    Saver::new(app.backend(), redis, settings, (v, Arc::new(app.keys(v))), i64::MAX / 2)
}

/// As above, but the worker dies between a commit and its settling: the rebuild came
/// after it had read two entries, and before it committed them, each in a
/// transaction of its own (as a worn entry's last try, or a failed batch's retries,
/// go). Before, nobody settled those orders: Redis counted their units unsold and
/// their shoppers' slots free for good. Each transaction read the voucher's count of
/// rebuilds, found one other than the worker had seen before its read, and put its
/// order on record; the sweeper settles the one left (`orders::unsettled`). The
/// second commit is the one that matters: compared with what the first had read, it
/// would have gone unrecorded (the review of 2026-11-29).
#[tokio::test]
async fn orders_committed_after_a_rebuild_by_a_worker_that_died_are_settled_by_the_sweeper() {
    use crate::support::proxy::HoldingLink;
    use seckill::testing::{sweep, Entry};
    let Some(target) = one_node() else { return };
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let (v, buyers) = sale_grabbed_by(&app, "died", 4).await;
    let keys = app.keys(v);
    let read = |n: usize| {
        let mut redis = app.redis.clone();
        let orders = keys.orders.clone();
        async move {
            let opts = StreamReadOptions::default().group(GROUP, "w-dies").count(n);
            let reply: redis::Value = redis.xread_options(&[&orders], &[">"], &opts).await.unwrap();
            Entry::from_read(reply).unwrap()
        }
    };
    let records = || async {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM unsettled_batches").fetch_one(&app.db).await.unwrap();
        n
    };
    // The link holds the saver's third script call: the last settling (the script is
    // loaded first, so that no call comes back for want of it).
    let _: String = app.backend().scripts.settle.load_async(&mut app.redis.clone()).await.unwrap();
    let link = HoldingLink::to(&target, (b"EVALSHA", 3)).await;
    let mut saver = saver_through(&link, &app, v, "w-dies").await;
    saver.reads_begin();
    saver.handle(read(2).await).await.unwrap();
    assert_eq!(records().await, 0, "a settled batch leaves no record");

    saver.reads_begin(); // as the worker does before each step's reads
    let mut second = read(2).await;
    let last = second.pop().unwrap();
    lose_and_rebuild(&app, v).await;
    saver.handle(second).await.unwrap();
    assert_eq!(records().await, 0, "settled, and struck");
    {
        let handled = saver.handle(vec![last]);
        tokio::pin!(handled);
        link.drive_until_held(handled.as_mut(), "settling").await;
        link.sever();
        assert!(handled.await.is_err(), "the settling failed");
    }
    drop(saver); // the worker died
    let mut redis = app.redis.clone();
    let stock: i64 = redis.get(&keys.left).await.unwrap();
    assert_eq!((stock, records().await), (7, 1), "rebuilt with two orders, one settled since, one on record");

    let backend = app.backend();
    wait_until("the sweeper settles the batch on record", SOON, || async {
        sweep(&backend, &mut Default::default()).await.unwrap();
        records().await == 0
    })
    .await;
    four_settled_of_ten(&app, v, &buyers).await;
    app.stop().await;
}

/// Redis loses a voucher while a worker holds an order X it has not committed; the
/// rebuild (without X) runs, and X's shopper grabs again (Y, granted) before X
/// commits. Settling X takes its unit though its shopper is in `buyers` (Y put them
/// there); the database refuses Y (the shopper holds X) and Y gives its own unit back:
/// Redis's stock + buyers = total, as in the database. Before, X's settle saw the
/// buyer, took nothing, and Y's give-back made a unit out of nothing.
#[tokio::test]
async fn a_shopper_granted_again_after_a_rebuild_leaves_no_phantom_unit() {
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let v = app.create_voucher(5, -5, 3600).await;
    let ann = app.sign_in("phantom-ann").await;
    let (status, body) = app.grab(&ann, v).await;
    assert_eq!(status, 200, "{body}");
    let x_id = body["order_id"].as_str().unwrap().to_owned();
    let x = read_and_crash(&app, v, "w-holds-x", 1).await;
    let (backend, keys, mut redis) = (app.backend(), app.keys(v), app.redis.clone());
    lose_and_rebuild(&app, v).await;
    let (status, body) = app.grab(&ann, v).await;
    assert_eq!(status, 200, "ann grabs again: {body}");
    let (y_id, y_receipt) = (body["order_id"].as_str().unwrap().to_owned(), body["receipt"].clone());
    assert_eq!(store::persist(&app.db, &x, PAY).await.unwrap(), [seckill::testing::Fate::Persisted]);
    settle(&backend, &mut redis, (v, &app.keys(v)), i64::MAX / 2, &[("0-1", &x[0])]).await.unwrap();
    // A worker reads Y: the database refuses it, and it ends.
    let opts = app.restart_options();
    app.stop().await;
    let app = TestApp::with(opts).await;
    let (shop, cookie) = (&app, [("cookie", ann.cookie.as_str())]);
    let result = |id: String| async move {
        let (status, body) =
            shop.call("grab_result", serde_json::json!({ "voucher_id": v, "order_id": id }), &cookie).await;
        assert_eq!(status, 200, "{body}");
        (body["status"].as_str().unwrap_or_default().to_owned(), body["reason"].as_str().map(str::to_owned))
    };
    wait_until("Y is refused", SOON, || async { result(y_id.clone()).await.0 == "failed" }).await;
    assert_eq!(result(y_id.clone()).await, ("failed".into(), Some("already_bought".into())));
    assert_eq!(result(x_id.clone()).await, ("success".into(), None));
    let mut redis = app.redis.clone();
    let stock: i64 = redis.get(&keys.left).await.unwrap();
    let in_redis: i64 = redis.hlen(&keys.buyers).await.unwrap();
    let left: i64 =
        sqlx::query_scalar("SELECT stock_left FROM vouchers WHERE id = $1").bind(v).fetch_one(&app.db).await.unwrap();
    assert_eq!((stock, in_redis, left), (4, 1, 4), "Redis stock, Redis buyers, database stock");
    // Both grants were answered "queued": the report counts both, Y though no row
    // records it (before, it was in none of the report's answers).
    wait_until("the report counts both grants", SOON, || async {
        let report = app.admin("sale_report", serde_json::json!({ "voucher_id": v })).await;
        report["answers"]["granted"] == 2
    })
    .await;
    // Redis forgets Y's result (its data lost again): Y's shopper, with Y's receipt,
    // still hears why Y was not kept, and Y is not declared lost (before, it was, and
    // buried as a dead letter the operator saw).
    let () = redis.hdel(&keys.results, &y_id).await.unwrap();
    let ask = serde_json::json!({ "voucher_id": v, "order_id": y_id, "receipt": y_receipt });
    let (status, body) = app.call("grab_result", ask, &cookie).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((&body["status"], &body["reason"]), (&"failed".into(), &"already_bought".into()), "{body}");
    let buried = rows_of_sale(&app, "dead_letters", v).await;
    assert_eq!(buried, 0, "no dead letter");
    app.stop().await;
}

/// A batch settles in chunks of 1000 orders (lua/settle.lua): every order of a batch
/// of 2,500 gets its result and its acknowledgement, and each order Redis lost takes
/// one unit and one slot, in every chunk.
#[tokio::test]
async fn a_batch_larger_than_a_chunk_settles_every_order() {
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let v = app.create_voucher(3000, -5, 3600).await;
    let (backend, keys, mut redis) = (app.backend(), app.keys(v), app.redis.clone());
    // Orders 1..=2500 of users 1..=2500. Those Redis lost (granted before a rebuild,
    // so without a result): the odd ones, on both sides of the chunks' border.
    let users: Vec<i64> = (1..=2500).collect();
    let mut pipe = redis::pipe();
    for (i, user) in users.iter().enumerate() {
        pipe.xadd(&keys.orders, "*", &[("order", (i + 1).to_string()), ("user", user.to_string())]).ignore();
        if user % 2 == 0 {
            pipe.hset(&keys.buyers, user, i + 1).ignore();
            pipe.hset(&keys.results, i + 1, format!("queued:{user}")).ignore();
        }
    }
    let () = pipe.query_async(&mut redis).await.unwrap();
    let opts = StreamReadOptions::default().group(GROUP, "w-big").count(users.len());
    let reply: StreamReadReply = redis.xread_options(&[&keys.orders], &[">"], &opts).await.unwrap();
    let entry_ids: Vec<String> = reply.keys[0].ids.iter().map(|e| e.id.clone()).collect();
    assert_eq!(entry_ids.len(), users.len());
    let msgs: Vec<OrderMsg> = (0..users.len())
        .map(|i| OrderMsg { voucher_id: v, order_id: i as i64 + 1, user_id: users[i], price: None })
        .collect();
    let orders: Vec<(&str, &OrderMsg)> = entry_ids.iter().map(String::as_str).zip(&msgs).collect();

    assert_eq!(settle(&backend, &mut redis, (v, &app.keys(v)), i64::MAX / 2, &orders).await.unwrap(), 0);
    let results: usize = redis.hlen(&keys.results).await.unwrap();
    let pending: redis::streams::StreamPendingReply = redis.xpending(&keys.orders, GROUP).await.unwrap();
    let (stock, buyers): (i64, usize) = (redis.get(&keys.left).await.unwrap(), redis.hlen(&keys.buyers).await.unwrap());
    // The 1,250 orders Redis had lost took a unit and a slot each.
    assert_eq!((results, pending.count(), stock, buyers), (2500, 0, 3000 - 1250, 2500));
    app.stop().await;
}

/// Rebuilds racing commits: Redis loses the voucher again and again while 120 orders
/// are committed and settled in batches. Whatever the interleaving, Redis ends with the
/// database's stock and buyers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rebuilds_racing_commits_keep_redis_and_the_database_equal() {
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let v = app.create_voucher(200, -5, 3600).await;
    let shoppers = app.sign_in_many("race-rebuild", 120).await;
    for s in &shoppers {
        assert_eq!(app.grab(s, v).await.0, 200);
    }
    let read = read_and_crash(&app, v, "w-race", 120).await;
    let backend = app.backend();
    let keys = app.keys(v);
    let committing = Arc::new(AtomicBool::new(true));
    let rebuilt = Arc::new(AtomicUsize::new(0));
    let commits = {
        let (backend, db, committing, rebuilt) = (backend.clone(), app.db.clone(), committing.clone(), rebuilt.clone());
        let keys = keys.clone();
        tokio::spawn(async move {
            let mut redis = backend.redis.clone();
            for (i, chunk) in read.chunks(5).enumerate() {
                // Keep the two interleaved however the machine schedules them: a
                // rebuild every other chunk at least.
                while rebuilt.load(Ordering::SeqCst) < i / 2 {
                    tokio::task::yield_now().await;
                }
                store::persist(&db, chunk, PAY).await.unwrap();
                let entries: Vec<(&str, &OrderMsg)> = chunk.iter().map(|m| ("0-1", m)).collect();
                settle(&backend, &mut redis, (v, &keys), i64::MAX / 2, &entries).await.unwrap();
            }
            committing.store(false, Ordering::SeqCst);
        })
    };
    let rebuilds = {
        let (backend, db) = (backend.clone(), app.db.clone());
        tokio::spawn(async move {
            let mut redis = backend.redis.clone();
            while committing.load(Ordering::SeqCst) {
                let () = redis.del(&[&keys.left, &keys.buyers, &keys.window]).await.unwrap();
                let row = vouchers::get(&db, v).await.unwrap().unwrap();
                warm(&backend, &row).await.unwrap();
                rebuilt.fetch_add(1, Ordering::SeqCst);
            }
            rebuilt.load(Ordering::SeqCst)
        })
    };
    commits.await.unwrap();
    assert!(rebuilds.await.unwrap() > 1, "the rebuilds ran during the commits");
    let mut redis = app.redis.clone();
    let keys = app.keys(v);
    let stock: i64 = redis.get(&keys.left).await.unwrap();
    let in_redis: i64 = redis.hlen(&keys.buyers).await.unwrap();
    let left: i64 =
        sqlx::query_scalar("SELECT stock_left FROM vouchers WHERE id = $1").bind(v).fetch_one(&app.db).await.unwrap();
    assert_eq!((stock, in_redis, left), (80, 120, 80), "Redis stock, Redis buyers, database stock");
    app.stop().await;
}

/// A sale of 5 with `name`'s grab not yet persisted (no worker runs on `app`), then
/// Redis loses the sale, which is warmed back from the database: the sale, the
/// shopper and the lost grab (its order id and receipt).
async fn a_grab_redis_lost(app: &TestApp, name: &str) -> (i64, Shopper, Granted) {
    let (v, who, granted) = a_grab(app, name).await;
    redis_loses_the_sale(app, v).await;
    (v, who, granted)
}

/// A sale of 5 and `name`'s grab of it, granted: the sale, the shopper and the grant.
async fn a_grab(app: &TestApp, name: &str) -> (i64, Shopper, Granted) {
    let v = app.create_voucher(5, -5, 3600).await;
    let who = app.sign_in(name).await;
    let (status, body) = app.grab(&who, v).await;
    assert_eq!(status, 200, "{body}");
    (v, who, Granted::of(&body))
}

/// A grant as `grab` answered it: what asking about it sends.
#[derive(Clone)]
struct Granted {
    order_id: String,
    receipt: String,
}

impl Granted {
    fn of(answer: &serde_json::Value) -> Self {
        let field = |k: &str| answer[k].as_str().unwrap_or_else(|| panic!("no {k} in {answer}")).to_owned();
        Self { order_id: field("order_id"), receipt: field("receipt") }
    }

    /// `grab_result`'s arguments for this grant in `v`.
    fn ask(&self, v: i64) -> serde_json::Value {
        serde_json::json!({ "voucher_id": v, "order_id": self.order_id, "receipt": self.receipt })
    }

    /// `grab_result` for this grant in `v`, asked by `who`: the status and the
    /// result's `status` and `reason`.
    async fn read_by(&self, app: &TestApp, v: i64, who: &Shopper) -> (u16, Option<String>, Option<String>) {
        let (status, body) = app.call("grab_result", self.ask(v), &[("cookie", who.cookie.as_str())]).await;
        let text = |k: &str| body[k].as_str().map(str::to_owned);
        (status.as_u16(), text("status"), text("reason"))
    }
}

/// Redis loses the sale's keys (a restart without its data, an eviction).
async fn lose_the_sale(app: &TestApp, v: i64) {
    let keys = app.keys(v);
    let lost = [&keys.left, &keys.buyers, &keys.window, &keys.orders, &keys.results, &keys.dlq, &keys.refused];
    let () = app.redis.clone().del(&lost).await.unwrap();
}

/// Redis loses the sale's keys, and a rebuild from the database loads them again.
async fn lose_and_rebuild(app: &TestApp, v: i64) {
    lose_the_sale(app, v).await;
    let row = vouchers::get(&app.db, v).await.unwrap().unwrap();
    assert!(warm(&app.backend(), &row).await.unwrap(), "the voucher is rebuilt");
}

/// An order cancelled once Redis no longer holds its sale (its keys expire a day after
/// its end, and a time to pay of days allows a cancel after that; or Redis lost them)
/// gives nothing back there and leaves no key behind. Before, its give-back made the
/// sale's `restocked` set again, without an expiry, for good (the attack of
/// 2026-11-29). A rebuild still counts the unit, from the database.
#[tokio::test]
async fn a_cancel_after_the_sale_left_redis_leaves_no_key_behind() {
    use seckill::testing::{give_back, lifecycle};
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let (v, _) = sale_grabbed_by(&app, "gone", 1).await;
    let read = read_and_crash(&app, v, "w-gone", 1).await;
    store::persist(&app.db, &read, PAY).await.unwrap();
    let keys = app.keys(v);
    let every = [&keys.left, &keys.buyers, &keys.window, &keys.orders, &keys.results, &keys.dlq, &keys.refused];
    let () = app.redis.clone().del(&every).await.unwrap();
    let () = app.redis.clone().del(&[&keys.given_back, &keys.changes]).await.unwrap();

    let m = &read[0];
    let now = chrono::Utc::now().timestamp_millis();
    let cancel = lifecycle::cancel_by_shopper(&app.db, m.order_id, m.user_id, now).await.unwrap();
    let lifecycle::Cancel::Cancelled(_, owed) = cancel else { panic!("not cancelled: {cancel:?}") };
    // The unit is announced all the same (every process clears its sold-out flag, and
    // its next grab rebuilds the sale); on one Redis, heard here.
    let mut events = match one_node() {
        Some(node) => {
            let mut events = redis::Client::open(format!("redis://{node}/")).unwrap().get_async_pubsub().await.unwrap();
            events.subscribe(&*app.backend().events_channel).await.unwrap();
            Some(events)
        }
        None => None,
    };
    assert!(!give_back(&app.backend(), &owed).await.unwrap(), "nothing to give back to");
    if let Some(events) = events.as_mut() {
        use futures::StreamExt;
        let heard = tokio::time::timeout(SOON, events.on_message().next()).await.expect("an event").unwrap();
        let heard: String = heard.get_payload().unwrap();
        assert!(heard.starts_with("restock") && heard.contains(&v.to_string()), "the restock of sale {v}: {heard}");
    }
    let left: bool = app.redis.clone().exists(&keys.given_back).await.unwrap();
    assert!(!left, "no key made");

    let row = vouchers::get(&app.db, v).await.unwrap().unwrap();
    assert!(warm(&app.backend(), &row).await.unwrap(), "rebuilt");
    let stock: i64 = app.redis.clone().get(&keys.left).await.unwrap();
    assert_eq!(stock, 10, "the unit counted back, from the database");
    app.stop().await;
}

/// A sale of ten units, granted to `n` shoppers named `<prefix>-<i>`.
async fn sale_grabbed_by(app: &TestApp, prefix: &str, n: usize) -> (i64, Vec<Shopper>) {
    let v = app.create_voucher(10, -5, 3600).await;
    let mut buyers = Vec::new();
    for i in 0..n {
        let s = app.sign_in(&format!("{prefix}-{i}")).await;
        assert_eq!(app.grab(&s, v).await.0, 200);
        buyers.push(s);
    }
    (v, buyers)
}

/// The shopper of `m` cancels it, and its unit goes back to Redis if Redis holds the
/// sale: true when it went back now.
async fn cancel_and_give_back(app: &TestApp, m: &OrderMsg) -> bool {
    use seckill::testing::{give_back, lifecycle};
    let now = chrono::Utc::now().timestamp_millis();
    let cancel = lifecycle::cancel_by_shopper(&app.db, m.order_id, m.user_id, now).await.unwrap();
    let lifecycle::Cancel::Cancelled(_, owed) = cancel else { panic!("not cancelled: {cancel:?}") };
    give_back(&app.backend(), &owed).await.unwrap()
}

/// Redis loses every key of the sale, which is warmed back from the database.
async fn redis_loses_the_sale(app: &TestApp, v: i64) {
    lose_the_sale(app, v).await;
    app.admin("warm_up", serde_json::json!({ "voucher_id": v })).await;
}

/// A sale's first sell-out stays its sell-out on the dashboard (`sale_stats`) when
/// Redis lost the sale and it sold out again after its rebuild, as the report says.
/// Before (an attack, 2026-11-30), the dashboard read the rebuilt window's second one.
#[tokio::test]
async fn the_first_sell_out_outlives_a_rebuild_on_the_dashboard_too() {
    let app = TestApp::spawn().await;
    let v = app.create_voucher(1, -5, 3600).await;
    let (first, second) = (app.sign_in("first-sell-out").await, app.sign_in("second-sell-out").await);
    assert_eq!(app.grab(&first, v).await.0, 200);
    let kept = app.wait_for_stats("kept and saved", v, |s| s["persisted"] == 1 && s["sold_out_at_ms"].is_i64()).await;
    let first_at = kept["sold_out_at_ms"].as_i64();
    let row = || async { vouchers::get(&app.db, v).await.unwrap().unwrap().sold_out_at };
    wait_until("the sell-out kept in the row", SETTLED, || async { row().await.is_some() }).await;
    assert_eq!(row().await, first_at);

    redis_loses_the_sale(&app, v).await;
    app.admin("add_stock", serde_json::json!({ "voucher_id": v, "units": 1 })).await;
    assert_eq!(app.grab(&second, v).await.0, 200, "sold out again");
    let window: Option<i64> = app.redis.clone().hget(app.keys(v).window, "sold_out_at").await.unwrap();
    assert!(window > first_at, "the rebuilt window holds the second: {window:?}");
    let stats = app.stats(v).await;
    assert_eq!(stats["sold_out_at_ms"].as_i64(), first_at, "{stats}");
    let report = app.admin("sale_report", serde_json::json!({ "voucher_id": v })).await;
    let said = chrono::DateTime::parse_from_rfc3339(report["sold_out_at"].as_str().unwrap()).unwrap();
    assert_eq!(Some(said.timestamp_millis()), first_at, "the report agrees");
    app.stop().await;
}

/// A grab the worker dead-lettered reads `failed` with reason `dead_letter` once Redis
/// has forgotten its result (a rebuild loads the results of stored orders only), to
/// its shopper alone. Before, it read `lost`.
#[tokio::test]
async fn a_dead_lettered_grab_keeps_its_reason_when_redis_forgets_it() {
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let (v, ann, granted) = a_grab(&app, "buried-ann").await;
    // The worker gave up on it (the database kept refusing it).
    let order_id = granted.order_id.parse().unwrap();
    let m = OrderMsg { voucher_id: v, order_id, user_id: ann.user_id, price: None };
    assert_eq!(store::bury(&app.db, &m, "dead_letter").await.unwrap(), Fate::Buried);
    redis_loses_the_sale(&app, v).await;
    let read = granted.read_by(&app, v, &ann).await;
    assert_eq!(read, (200, Some("failed".into()), Some("dead_letter".into())));
    let eve = app.sign_in("buried-eve").await;
    assert_eq!(granted.read_by(&app, v, &eve).await.0, 404, "another shopper learns nothing of it");
    app.stop().await;
}

/// Redis (without persistence) loses a sale with a grab not yet persisted: once the
/// voucher is rebuilt, that grab reads `failed` with reason `lost`, not a silent
/// `unknown_order`, and its shopper may grab again. An id from the future stays unknown.
#[tokio::test]
async fn a_grab_lost_with_redis_reads_failed_lost() {
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let (v, ann, lost) = a_grab_redis_lost(&app, "lost-ann").await;
    let cookie = [("cookie", ann.cookie.as_str())];
    let ask = |granted: Granted| app.call("grab_result", granted.ask(v), &cookie);
    let (status, body) = ask(lost.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["status"].as_str(), body["reason"].as_str()), (Some("failed"), Some("lost")));
    let made_up = seckill::testing::compose(chrono::Utc::now().timestamp() + 120, 7).to_string();
    let made_up = Granted { order_id: made_up, ..lost };
    assert_eq!(ask(made_up).await.0, 404, "an id not minted yet is nobody's order");
    let (status, body) = app.grab(&ann, v).await;
    assert_eq!(status, 200, "the shopper may grab again: {body}");
    // The report counts it lost, not among the worker's dead letters (before, it did).
    let report = app.admin("sale_report", serde_json::json!({ "voucher_id": v })).await;
    let units = &report["units"];
    assert_eq!((units["lost"].as_i64(), units["dead_letters"].as_i64()), (Some(1), Some(0)), "{units}");
    app.stop().await;
}

/// A grab whose answer was lost (a slow gate past the client's patience, a dropped
/// link) is sent again and hears `already_bought`: with the order's id and its receipt,
/// the one the first answer carried, so its shopper follows the order as the first
/// answer would have, and hears `lost` when Redis loses it before it is saved. Before,
/// `already_bought` carried no receipt: the shopper believed they had bought, nobody
/// could ask about the grant, and its loss was never told.
#[tokio::test]
async fn a_grab_sent_again_learns_the_receipt_and_hears_lost() {
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let (v, ann, first) = a_grab(&app, "again-ann").await;
    let (status, body) = app.grab(&ann, v).await;
    assert_eq!((status.as_u16(), crate::support::code(&body)), (409, "already_bought"), "{body}");
    let again = Granted::of(&body);
    assert_eq!((&again.order_id, &again.receipt), (&first.order_id, &first.receipt), "{body}");
    redis_loses_the_sale(&app, v).await;
    assert_eq!(again.read_by(&app, v, &ann).await, (200, Some("failed".into()), Some("lost".into())));
    app.stop().await;
}

/// "Lost" is final. A worker that read a grant's entry before Redis lost it (a
/// replica promoted without it) may persist it after its shopper was told the grab was
/// lost: the answer is decided for good before it is given (the order is buried), so
/// that late persist buries it instead, and the answer stays "lost". Before, the order
/// was saved and the answer turned to "success".
#[tokio::test]
async fn a_lost_grab_stays_lost_when_a_worker_saves_it_late() {
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let (v, ann, lost) = a_grab_redis_lost(&app, "late-ann").await;
    reads_lost_then_a_late_persist_buries_it(&app, v, &ann, &lost).await;
    let stored = rows_of_sale(&app, "orders", v).await;
    assert_eq!(stored, 0, "no order for a lost grab");
    app.stop().await;
}

/// A shopper whose grab Redis lost, and who grabbed again (a new grant Redis holds), is
/// still told the first was lost, not `unknown_order`; and a second grab lost in the
/// same sale is buried too, so a late persist cannot turn it into an order after
/// "lost" was said. Before, the first read `unknown_order` (neither an order nor a
/// failure: a chaos run with a master cut off found it), and only one burial was made
/// per shopper and sale.
#[tokio::test]
async fn every_lost_grab_of_a_shopper_reads_lost_and_stays_lost() {
    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let (v, ann, first) = a_grab_redis_lost(&app, "twice-ann").await;
    let (status, body) = app.grab(&ann, v).await;
    assert_eq!(status, 200, "the shopper grabs again: {body}");
    let second = Granted::of(&body);
    assert_eq!(first.read_by(&app, v, &ann).await, (200, Some("failed".into()), Some("lost".into())));
    // Redis loses the second grant as well.
    redis_loses_the_sale(&app, v).await;
    reads_lost_then_a_late_persist_buries_it(&app, v, &ann, &second).await;
    app.stop().await;
}

/// Nobody can make another shopper's grant fail (issue 53). Order ids are predictable:
/// a shopper who grabbed once knows the next ones. Asking `grab_result` about them
/// before they are handed out, and about the grants that took them before they are
/// saved (on a sale of several shards, from another bucket), with no receipt or with
/// one's own, answers `unknown_order` and buries nothing: every grant is saved. Before,
/// each such ask buried the id (`lost`), and the grant that took it read `failed`.
#[tokio::test]
async fn nobody_can_declare_another_shoppers_grant_lost() {
    for shards in [1, 4] {
        let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
        let v = app.create_sharded(40, (-5, 3600), shards).await;
        let mallory = app.sign_in("mallory").await;
        let (status, body) = app.grab(&mallory, v).await;
        assert_eq!(status, 200, "{body}");
        let mine = Granted::of(&body);
        let first: i64 = mine.order_id.parse().unwrap();
        let guesses = (first + 1..=first + 8).map(|id| id.to_string());
        let refused = |id: String| asked_as(&app, v, &mallory, id, &mine.receipt);
        for id in guesses {
            refused(id).await;
        }
        let victims = app.sign_in_many("victim", 8).await;
        let granted = app.grab_all(victims.iter(), v, 8).await;
        let mut saving = Vec::new();
        for (user_id, status, body) in granted {
            assert_eq!(status, 200, "{body}");
            let theirs = Granted::of(&body);
            refused(theirs.order_id.clone()).await;
            saving.push(OrderMsg { voucher_id: v, order_id: theirs.order_id.parse().unwrap(), user_id, price: None });
        }
        let others = victims.iter().filter(|s| bucket_of(s.user_id, shards) != bucket_of(mallory.user_id, shards));
        assert!(shards == 1 || others.count() > 0, "some victims live in another bucket");
        let fates = store::persist(&app.db, &saving, PAY).await.unwrap();
        assert!(fates.iter().all(|f| *f == Fate::Persisted), "every victim's grant is saved: {fates:?}");
        let buried: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM dead_letters").fetch_one(&app.db).await.unwrap();
        assert_eq!(buried, 0, "nothing buried (shards {shards})");
        app.stop().await;
    }
}

/// `who` asks about `order_id` of `v` with no receipt, and with `receipt` (their own
/// grant's): `unknown_order` both times.
async fn asked_as(app: &TestApp, v: i64, who: &Shopper, order_id: String, receipt: &str) {
    let cookie = [("cookie", who.cookie.as_str())];
    for receipt in [None, Some(receipt)] {
        let ask = serde_json::json!({ "voucher_id": v, "order_id": order_id, "receipt": receipt });
        let (status, body) = app.call("grab_result", ask, &cookie).await;
        assert_eq!((status.as_u16(), crate::support::code(&body)), (404, "unknown_order"), "{order_id}: {body}");
    }
}

/// `order_id`, a grab Redis lost, reads `failed: lost`; a worker persisting it late
/// (it read the entry before Redis lost it) buries it instead; and it still reads lost.
async fn reads_lost_then_a_late_persist_buries_it(app: &TestApp, v: i64, who: &Shopper, lost: &Granted) {
    let cookie = [("cookie", who.cookie.as_str())];
    let ask = || app.call("grab_result", lost.ask(v), &cookie);
    let (_, body) = ask().await;
    assert_eq!((body["status"].as_str(), body["reason"].as_str()), (Some("failed"), Some("lost")), "{body}");
    let order_id = lost.order_id.parse().unwrap();
    let late = OrderMsg { voucher_id: v, order_id, user_id: who.user_id, price: None };
    assert_eq!(store::persist(&app.db, &[late], PAY).await.unwrap(), [Fate::Buried], "the late persist buries it");
    let (_, body) = ask().await;
    assert_eq!((body["status"].as_str(), body["reason"].as_str()), (Some("failed"), Some("lost")), "{body}");
}

/// A batch of 1,500 orders is one insert, whatever its size: every order goes in, and
/// of two orders of one shopper (its first and last) the first is the one stored.
#[tokio::test]
async fn a_large_batch_persists_in_one_insert_and_the_first_order_of_a_shopper_wins() {
    use seckill::testing::compose;

    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let v = app.create_voucher(2000, -5, 3600).await;
    let users = app.sign_in_many("large-batch", 1500).await;
    let now = chrono::Utc::now().timestamp();
    let mut batch: Vec<OrderMsg> = (0..1500)
        .map(|i| OrderMsg {
            voucher_id: v,
            order_id: compose(now, i + 1),
            user_id: users[i as usize].user_id,
            price: None,
        })
        .collect();
    batch.push(OrderMsg { voucher_id: v, order_id: compose(now, 1501), user_id: users[0].user_id, price: None });

    let outcomes = store::persist(&app.db, &batch, PAY).await.unwrap();
    assert!(outcomes[..1500].iter().all(|o| *o == Fate::Persisted), "{:?}", &outcomes[..3]);
    assert_eq!(outcomes[1500], Fate::Duplicate);
    let (stored, left): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM orders WHERE voucher_id = $1), stock_left FROM vouchers WHERE id = $2",
    )
    .bind(v)
    .bind(v)
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!((stored, left), (1500, 500));
    let first: i64 = sqlx::query_scalar("SELECT id FROM orders WHERE voucher_id = $1 AND user_id = $2")
        .bind(v)
        .bind(users[0].user_id)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(first, batch[0].order_id);
    app.stop().await;
}

/// One batch with every kind of entry: new orders, a redelivery, a second order of one
/// shopper, a buried order, and more new orders than the database has stock for.
#[tokio::test]
async fn a_mixed_batch_gets_each_entry_its_outcome() {
    use seckill::testing::{compose, db_clock, Fate};

    let app = TestApp::with(Options::default().with(|c| c.worker = false)).await;
    let v = app.create_voucher(3, -5, 3600).await;
    let users = app.sign_in_many("mixed", 5).await;
    let now = chrono::Utc::now().timestamp();
    let msg = |i: u32, user: usize| OrderMsg {
        voucher_id: v,
        order_id: compose(now, i),
        user_id: users[user].user_id,
        price: None,
    };
    assert_eq!(store::persist(&app.db, &[msg(1, 0)], PAY).await.unwrap(), vec![Fate::Persisted]);
    store::bury(&app.db, &msg(2, 1), "test").await.unwrap();

    let batch = [msg(1, 0), msg(3, 0), msg(2, 1), msg(4, 2), msg(5, 3)];
    let outcomes = store::persist(&app.db, &batch, PAY).await.unwrap();
    use Fate::*;
    assert_eq!(outcomes, vec![Persisted, Duplicate, Buried, Persisted, Persisted]);
    // Stock 3: one taken before, two now. A sixth order finds none.
    let outcomes = store::persist(&app.db, &[msg(6, 4), msg(1, 0)], PAY).await.unwrap();
    assert_eq!(outcomes, vec![NoStock, Persisted]);
    let left: i64 =
        sqlx::query_scalar("SELECT stock_left FROM vouchers WHERE id = $1").bind(v).fetch_one(&app.db).await.unwrap();
    assert_eq!(left, 0);
    // The grab time is read from the id in SQL; the deadline is the time to pay after
    // the saving (within this second's grab, so after it).
    let (created_at, deadline): (i64, i64) =
        sqlx::query_as("SELECT created_at, pay_deadline FROM orders WHERE id = $1")
            .bind(msg(4, 2).order_id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    let saved = db_clock::now_ms(&app.db).await.unwrap();
    assert_eq!(created_at, now * 1000);
    assert!((now * 1000 + PAY..=saved + PAY).contains(&deadline), "deadline {deadline}, saved by {saved}");
    app.stop().await;
}

/// Two processes under one `SECKILL_WORKER_NAME`: the second waits for the name (its
/// holder may have just died), then refuses to start, saying why, and the first works
/// on. Before, both started, and one leaving a group could delete the other's consumer
/// with the orders it held. A holder that stops lets the name go at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_name_is_one_running_processs_at_a_time() {
    let named = |opts: Options| opts.with(|c| c.worker_name = Some("w-twin".into()));
    let one = TestApp::with(named(Options::default())).await;
    let v = one.create_voucher(5, -5, 3600).await;
    let lease = format!("{}:worker:w-twin", one.namespace);
    let Options { mut config, reuse } = named(one.restart_options());
    let reuse = reuse.unwrap();
    (config.database_url, config.redis_namespace) = (reuse.database_url.clone(), reuse.namespace.clone());
    config.redis_url = Some(crate::support::redis_url());
    let leptos = leptos::config::LeptosOptions::builder().output_name("seckill").site_root("target/site").build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let asked = std::time::Instant::now();
    let second = seckill::server::serve(config, leptos, listener, std::future::pending());
    match tokio::time::timeout(crate::support::SETTLED, second).await {
        Ok(Err(seckill::server::ServeError::Config(why))) => {
            assert!(why.contains("SECKILL_WORKER_NAME w-twin") && why.contains("another running process"), "{why}")
        }
        other => panic!("a second process under one name started: {other:?}"),
    }
    assert!(asked.elapsed() >= seckill::testing::NAME_LEASE, "it waited for the name to lapse first");
    let ann = one.sign_in("twin-ann").await;
    assert_eq!(one.grab(&ann, v).await.0, 200);
    one.wait_for_stats("the first process's worker persists", v, |s| s["persisted"] == 1).await;
    let mut redis = one.redis.clone();
    one.stop().await;
    assert!(!redis.exists::<_, bool>(&lease).await.unwrap(), "a process that stops lets its name go");
}

/// A worker stopped longer than its name's lease (SIGSTOP, a long pause) finds the name
/// taken by a process started under it meanwhile (played here by overwriting the
/// lease): it stops reading at once, and leaves its consumer in the group (it is the
/// other process's now, with whatever it holds).
#[tokio::test]
async fn a_worker_whose_name_was_taken_stops_and_leaves_the_group_alone() {
    let app = TestApp::with(Options::default().with(|c| c.worker_name = Some("w-taken".into()))).await;
    let v = app.create_voucher(5, -5, 3600).await;
    let ann = app.sign_in("taken-ann").await;
    assert_eq!(app.grab(&ann, v).await.0, 200);
    app.wait_for_stats("persisted", v, |s| s["persisted"] == 1).await;
    let mut feed = crate::support::Feed::open(&app, false).await;
    let mut redis = app.redis.clone();
    let () = redis.set(format!("{}:worker:w-taken", app.namespace), "another process").await.unwrap();
    feed.until(SOON, |f| f["type"] == "event" && f["kind"] == "worker_left").await;
    let consumers: Vec<redis::Value> =
        redis::cmd("XINFO").arg("CONSUMERS").arg(app.keys(v).orders).arg(GROUP).query_async(&mut redis).await.unwrap();
    assert_eq!(consumers.len(), 1, "the consumer stays in the group");
    app.stop().await;
}
