//! Order ids stay unique across processes drawing blocks from one Redis counter.

use crate::support::{proxy::ReplicationLink, redis_url, SETTLED, SOON};
use futures::future::join_all;
use redis::AsyncCommands;
use seckill::{
    server::local_redis::LocalRedis,
    testing::{decompose, order_id_counter, OrderIds, RedisConn, Replicas, SPARE_BASE},
};
use std::{collections::HashSet, sync::Arc};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_generators_never_repeat_an_id() {
    let namespace = format!("t{}", rand::random::<u64>());
    let redis = RedisConn::open(&redis_url()).await.unwrap();
    // Two "processes" with small blocks, so blocks are refilled often and concurrently.
    let gens = [Arc::new(OrderIds::new(&namespace, 7)), Arc::new(OrderIds::new(&namespace, 13))];
    let tasks = (0..16).map(|i| {
        let ids = gens[i % 2].clone();
        let redis = redis.clone();
        tokio::spawn(async move {
            let mut out = Vec::new();
            for _ in 0..500 {
                out.push(ids.next(&redis).await.unwrap());
            }
            out
        })
    });
    let all: Vec<i64> = join_all(tasks).await.into_iter().flat_map(|r| r.unwrap()).collect();
    let distinct: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "an id was handed out twice");
    let now = chrono::Utc::now().timestamp();
    for id in &all {
        assert!(*id > 0);
        let (at, counter) = decompose(*id);
        assert!((now - at.timestamp()).abs() < 60, "timestamp part is the grab time");
        assert!(counter >= 1);
    }
}

/// Redis loses the day's counter (a restart without persistence) while two processes
/// hold blocks: neither they nor a process started afterwards hand out a used id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_counter_never_repeats_an_id() {
    let namespace = format!("t{}", rand::random::<u64>());
    let mut redis = RedisConn::open(&redis_url()).await.unwrap();
    // Blocks of 100, 30 taken from each: no refill is on its way when the counter goes
    // (a refill during a real outage would fail, not land on the empty Redis).
    let before = [Arc::new(OrderIds::new(&namespace, 100)), Arc::new(OrderIds::new(&namespace, 100))];
    let mut seen = HashSet::new();
    for ids in &before {
        for _ in 0..30 {
            assert!(seen.insert(ids.next(&redis).await.unwrap()));
        }
    }
    let key = format!("{namespace}:icr:order:{}", chrono::Utc::now().format("%Y%m%d"));
    let deleted: i64 = redis.del(&key).await.unwrap();
    assert_eq!(deleted, 1, "the counter lives where the test expects it");
    // The outage: Redis is gone for a moment (50 ms; real ones last seconds) before it
    // answers again, empty.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let after = Arc::new(OrderIds::new(&namespace, 50));
    for round in 0..200 {
        for ids in before.iter().chain([&after]) {
            let id = ids.next(&redis).await.unwrap();
            assert!(seen.insert(id), "id {id} handed out twice (round {round})");
        }
    }
}

/// The day's counter fails while two processes take ids (here its key holds a value
/// of another type, which its script cannot count: on a cluster, its master is down,
/// `cluster::grabs_go_on_when_the_order_id_counters_master_dies`). They go on with
/// ids from the spare counter, then, once the counter answers again (made afresh),
/// from it; no id comes twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_counter_hands_over_to_its_spare_and_no_id_comes_twice() {
    let namespace = format!("t{}", rand::random::<u64>());
    let redis = RedisConn::open(&redis_url()).await.unwrap();
    let mut breaker = redis.clone();
    crate::support::clear_of_midnight().await;
    let gens = [Arc::new(OrderIds::new(&namespace, 5)), Arc::new(OrderIds::new(&namespace, 7))];
    let seen = std::sync::Mutex::new(HashSet::new());
    // A round: an id from each process; how many came from the spare.
    let round = || async {
        let mut spare = 0;
        for ids in &gens {
            let id = ids.next(&redis).await.unwrap();
            assert!(seen.lock().unwrap().insert(id), "id {id} handed out twice");
            spare += usize::from(u64::from(decompose(id).1) > SPARE_BASE);
        }
        spare
    };
    for _ in 0..20 {
        assert_eq!(round().await, 0, "the day's counter while it answers");
    }
    let key = order_id_counter(&namespace, &chrono::Utc::now().format("%Y%m%d").to_string());
    // In one transaction: a refill in the background may write the counter between.
    let () = redis::pipe().atomic().del(&key).hset(&key, "not", "a count").query_async(&mut breaker).await.unwrap();
    let mut spare = 0;
    for _ in 0..20 {
        spare += round().await;
    }
    assert!(spare >= 40 - 2 * 7, "ids from the spare once the blocks in hand ran out: {spare} of 40");
    let () = breaker.del(&key).await.unwrap();
    // It is tried again on the side 5 s after its last failure (`MAIN_REST`).
    crate::support::wait_until("the day's counter drawn from again", SETTLED, || async { round().await < 2 }).await;
}

/// The day's counter near the end of its values ([`SPARE_BASE`]): a block past them is
/// refused and writes nothing, so the counter never reaches the spare's values (which
/// a process of an older build, counting up to `u32::MAX`, would then hand out too),
/// and the ids come from the spare. Before, the script wrote the block it refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_counter_at_the_end_of_its_values_stays_there_and_the_spare_serves() {
    let namespace = format!("t{}", rand::random::<u64>());
    let mut redis = RedisConn::open(&redis_url()).await.unwrap();
    crate::support::clear_of_midnight().await;
    let key = order_id_counter(&namespace, &chrono::Utc::now().format("%Y%m%d").to_string());
    let near = SPARE_BASE - 5;
    let () = redis.set(&key, near).await.unwrap();
    let ids = Arc::new(OrderIds::new(&namespace, 10));
    for _ in 0..20 {
        let id = ids.next(&redis).await.unwrap();
        assert!(u64::from(decompose(id).1) > SPARE_BASE, "id {id} from the spare");
    }
    let kept: u64 = redis.get(&key).await.unwrap();
    assert_eq!(kept, near, "a refused block writes nothing");
}

/// A storm opens: hundreds of grabs find the hand empty at once. They wait for one
/// block instead of each fetching its own (which took hundreds of Redis calls and as
/// many blocks of the day's counter).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grabs_that_find_the_hand_empty_share_one_block() {
    let namespace = format!("t{}", rand::random::<u64>());
    let mut redis = RedisConn::open(&redis_url()).await.unwrap();
    let ids = Arc::new(OrderIds::new(&namespace, 1000));
    // 300 of 1000: under the half that starts a refill in the background.
    let tasks = (0..300).map(|_| {
        let (ids, redis) = (ids.clone(), redis.clone());
        tokio::spawn(async move { ids.next(&redis).await.unwrap() })
    });
    let counters: Vec<u64> = join_all(tasks).await.into_iter().map(|id| u64::from(decompose(id.unwrap()).1)).collect();
    let distinct: HashSet<u64> = counters.iter().copied().collect();
    assert_eq!(distinct.len(), 300, "an id was handed out twice");
    let key = format!("{namespace}:icr:order:{}", chrono::Utc::now().format("%Y%m%d"));
    let counter: u64 = redis.get(&key).await.unwrap();
    let first = counters.iter().min().unwrap();
    assert_eq!(counter - first + 1, 1000, "one block of 1000 was taken, no more");
}

/// The refill that grabs wait for fails (Redis is down): every one of them hears so
/// instead of waiting forever, and the first grab after Redis is back refills.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_refill_fails_its_waiters_and_the_next_grab_retries() {
    let dir = tempfile::TempDir::new().unwrap();
    let private = LocalRedis::start_steady(dir.path()).await.unwrap();
    let (url, port) = (private.url.clone(), private.port);
    let redis = RedisConn::open(&url).await.unwrap();
    let ids = Arc::new(OrderIds::new("t", 10));
    private.crash().await;
    let tasks = (0..50).map(|_| {
        let (ids, redis) = (ids.clone(), redis.clone());
        tokio::spawn(async move { tokio::time::timeout(SOON, ids.next(&redis)).await })
    });
    for answer in join_all(tasks).await {
        let answer = answer.unwrap().expect("a grab waited 10 s for a refill");
        assert!(answer.is_err(), "an id came from a Redis that is down: {answer:?}");
    }
    let _back = LocalRedis::start_on(dir.path(), port).await.unwrap();
    crate::support::wait_until("ids again", SOON, || async { ids.next(&redis).await.is_ok() }).await;
}

/// A failover loses the counter's last writes, and the promoted replica hands out
/// again what it never received, to be used in the same seconds. With a replica
/// required, a block is used once the replica holds it: while the replica is behind,
/// no id comes; once it catches up, the ids come, and after the master's death the
/// promoted replica hands out none of them. Before, the block was used at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_block_is_used_once_the_replica_holds_it() {
    let pair = Replicated::start().await;
    let Replicated { master, link, on_master, mut on_replica, .. } = pair;

    let ids = Arc::new(OrderIds::new("t", 10).waiting_for(Replicas { want: 1, wait_ms: 4_000 }));
    link.pause(true);
    let mut first = tokio::spawn({
        let (ids, on_master) = (ids.clone(), on_master.clone());
        async move { ids.next(&on_master).await }
    });
    let early = tokio::time::timeout(std::time::Duration::from_millis(300), &mut first).await;
    assert!(early.is_err(), "an id came from a block no replica held: {early:?}");
    link.pause(false);
    let counter = |id: i64| decompose(id).1;
    let mut handed = HashSet::from([counter(first.await.unwrap().unwrap())]);
    for _ in 1..10 {
        assert!(handed.insert(counter(ids.next(&on_master).await.unwrap())));
    }

    // The master dies; its replica takes over.
    master.crash().await;
    promote(&mut on_replica).await;
    none_again(&on_replica, &mut handed, "on both sides of the failover").await;
}

/// A failover that lost blocks: the replica is cut off while the master hands out
/// blocks (no replica required, or the wait for one ran out: a server waits 20 ms at
/// most), then the master dies and the replica takes over. Its counter is behind the
/// blocks the processes still use; last written under the old master, it jumps ahead
/// of them, so the promoted replica hands out none. Before, it handed them out again,
/// to be used in the same seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failover_that_lost_blocks_hands_none_of_them_out_again() {
    let pair = Replicated::start().await;
    let mut on_replica = pair.on_replica.clone();
    let counter = |id: i64| decompose(id).1;
    let before = Arc::new(OrderIds::new("t", 10));
    let mut handed = HashSet::new();
    for _ in 0..10 {
        assert!(handed.insert(counter(before.next(&pair.on_master).await.unwrap())));
    }
    pair.wait_in_sync().await;
    pair.link.pause(true);
    let cut_off = Arc::new(OrderIds::new("t", 10).waiting_for(Replicas { want: 1, wait_ms: 20 }));
    for ids in [&before, &cut_off] {
        for _ in 0..25 {
            assert!(handed.insert(counter(ids.next(&pair.on_master).await.unwrap())));
        }
    }

    pair.master.crash().await;
    promote(&mut on_replica).await;
    none_again(&on_replica, &mut handed, "on both sides of the failover").await;
}

/// Two failovers in quick succession: the first master's last blocks never reach
/// either replica; the one promoted jumps ahead and hands out blocks, and dies before
/// the other replica receives them. The second one promoted holds the counter as the
/// first master left it, so a jump of the margin alone would land on the blocks of
/// the one that died. The jump also counts the time since the last block it knows of
/// (40 values a millisecond, as a counter made afresh does), so it lands past them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_failover_soon_after_the_first_hands_out_none_of_its_blocks() {
    let dirs = [(); 3].map(|()| tempfile::TempDir::new().unwrap());
    let first = LocalRedis::start(dirs[0].path()).await.unwrap();
    let second = LocalRedis::start(dirs[1].path()).await.unwrap();
    let third = LocalRedis::start(dirs[2].path()).await.unwrap();
    let on_first = RedisConn::open(&first.url).await.unwrap();
    let mut on_second = RedisConn::open(&second.url).await.unwrap();
    let mut on_third = RedisConn::open(&third.url).await.unwrap();
    let (to_second, to_third) = (ReplicationLink::to(first.port).await, ReplicationLink::to(first.port).await);
    follow(&mut on_second, &to_second).await;
    follow(&mut on_third, &to_third).await;
    let counter = |id: i64| decompose(id).1;
    let mut handed = HashSet::new();
    let ids = Arc::new(OrderIds::new("t", 10));
    for _ in 0..10 {
        assert!(handed.insert(counter(ids.next(&on_first).await.unwrap())));
    }
    in_sync(&on_first, &on_second).await;
    in_sync(&on_first, &on_third).await;
    to_second.pause(true);
    to_third.pause(true);
    for _ in 0..25 {
        assert!(handed.insert(counter(ids.next(&on_first).await.unwrap())));
    }

    first.crash().await;
    promote(&mut on_second).await;
    let to_third = ReplicationLink::to(second.port).await;
    follow(&mut on_third, &to_third).await;
    to_third.pause(true);
    none_again(&on_second, &mut handed, "on both sides of the first failover").await;

    second.crash().await;
    promote(&mut on_third).await;
    none_again(&on_third, &mut handed, "again after the second failover").await;
}

/// An app whose Redis user may not run `INFO` (an ACL left it out) still gets ids:
/// the script cannot read the master's replication id, so it guards nothing against
/// a failover (the app logs so), but no grab fails for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ids_come_when_info_is_refused() {
    let dir = tempfile::TempDir::new().unwrap();
    let private = LocalRedis::start(dir.path()).await.unwrap();
    let mut admin = RedisConn::open(&private.url).await.unwrap();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "app", "on", ">app-password", "~*", "&*", "+@all", "-info"][..])
        .query_async(&mut admin)
        .await
        .unwrap();
    let url = format!("redis://app:app-password@127.0.0.1:{}", private.port);
    let app = RedisConn::open(&url).await.unwrap();
    let refused = redis::cmd("INFO").arg("replication").query_async::<String>(&mut app.clone()).await;
    assert!(refused.is_err(), "the user may not run INFO");
    let ids = Arc::new(OrderIds::new("t", 10));
    let mut handed = HashSet::new();
    for _ in 0..25 {
        assert!(handed.insert(ids.next(&app).await.unwrap()));
    }
}

/// A process started on `promoted` takes 30 ids (blocks of 10): none of their
/// counter values is among those `handed` out before (`when`: the failure message).
async fn none_again(promoted: &RedisConn, handed: &mut HashSet<u32>, when: &str) {
    let ids = Arc::new(OrderIds::new("t", 10));
    for _ in 0..30 {
        let value = decompose(ids.next(promoted).await.unwrap()).1;
        assert!(handed.insert(value), "counter value {value} handed out {when}");
    }
}

/// Makes the Redis behind `conn` a replica through `link`, and waits until its link
/// is up.
async fn follow(conn: &mut RedisConn, link: &ReplicationLink) {
    let _: () = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(link.port).query_async(conn).await.unwrap();
    crate::support::wait_until("the replica's link up", SOON, || async {
        replication(conn).await.0.as_deref() == Some("up")
    })
    .await;
}

/// Until `replica` has every write `master` made (its offset reached the master's).
async fn in_sync(master: &RedisConn, replica: &RedisConn) {
    crate::support::wait_until("the replica in sync", SOON, || async {
        let (_, on_master) = replication(master).await;
        let (link, on_replica) = replication(replica).await;
        link.as_deref() == Some("up") && on_replica >= on_master
    })
    .await;
}

/// A node's replication link status (replicas only) and offset.
async fn replication(conn: &RedisConn) -> (Option<String>, Option<u64>) {
    let mut conn = conn.clone();
    let info: String = redis::cmd("INFO").arg("replication").query_async(&mut conn).await.unwrap();
    let field = |name: &str| info.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).map(String::from);
    (field("master_link_status:"), field("master_repl_offset:").and_then(|o| o.parse().ok()))
}

/// A master and its replica (each a private redis-server), linked through a
/// [`ReplicationLink`], in sync.
struct Replicated {
    master: LocalRedis,
    link: ReplicationLink,
    on_master: RedisConn,
    on_replica: RedisConn,
    _replica: LocalRedis,
    _dirs: [tempfile::TempDir; 2],
}

impl Replicated {
    async fn start() -> Self {
        let dirs = [tempfile::TempDir::new().unwrap(), tempfile::TempDir::new().unwrap()];
        let master = LocalRedis::start(dirs[0].path()).await.unwrap();
        let replica = LocalRedis::start(dirs[1].path()).await.unwrap();
        let link = ReplicationLink::to(master.port).await;
        let (on_master, mut on_replica) =
            (RedisConn::open(&master.url).await.unwrap(), RedisConn::open(&replica.url).await.unwrap());
        follow(&mut on_replica, &link).await;
        let pair = Self { master, link, on_master, on_replica, _replica: replica, _dirs: dirs };
        pair.wait_in_sync().await;
        pair
    }

    /// Until the replica has every write the master made.
    async fn wait_in_sync(&self) {
        in_sync(&self.on_master, &self.on_replica).await;
    }
}

/// Makes the replica behind `conn` a master (`REPLICAOF NO ONE`), as a failover does.
async fn promote(conn: &mut RedisConn) {
    let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query_async(conn).await.unwrap();
}
