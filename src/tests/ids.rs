//! Order ids stay unique across processes drawing blocks from one Redis counter.

use crate::support::redis_url;
use futures::future::join_all;
use redis::aio::ConnectionManager;
use seckill::ids::{decompose, OrderIds};
use std::{collections::HashSet, sync::Arc};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_generators_never_repeat_an_id() {
    let namespace = format!("t{}", rand::random::<u64>());
    let redis = ConnectionManager::new(redis::Client::open(redis_url()).unwrap()).await.unwrap();
    // Two "processes" with small blocks, so blocks are refilled often and concurrently.
    let gens = [Arc::new(OrderIds::new(&namespace, 7)), Arc::new(OrderIds::new(&namespace, 13))];
    let tasks = (0..16).map(|i| {
        let ids = gens[i % 2].clone();
        let mut redis = redis.clone();
        tokio::spawn(async move {
            let mut out = Vec::new();
            for _ in 0..500 {
                out.push(ids.next(&mut redis).await.unwrap());
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
