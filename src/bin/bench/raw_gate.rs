//! The raw gate: Redis alone deciding grabs (`redis-benchmark` running
//! `lua/grab.lua`), the figure the storms are read beside.

use seckill::testing::{RedisConn, Scripts, LAYOUT_VERSION};

/// Grabs per second Redis alone decides one call each: `redis-benchmark` running the
/// gate script by EVALSHA with one random user a call, on keys of the bench's own
/// (removed after). The server's calls carry every grab of a sale that arrived
/// together (`sale::batches`), so a storm can pass this figure.
pub(crate) async fn raw_gate(redis_url: &str, calls: usize) -> Result<f64, String> {
    let mut redis = RedisConn::open(redis_url).await.map_err(|e| format!("raw gate: {e}"))?;
    let script = Scripts::default().grab;
    let sha = script.prepare_invoke().load_async(&mut redis).await.map_err(|e| format!("raw gate: {e}"))?;
    let base = format!("benchraw{}:{{v1}}", rand::random::<u32>());
    let keys: Vec<String> =
        ["stock", "buyers", "window", "orders", "results", "refused"].iter().map(|k| format!("{base}:{k}")).collect();
    let () = redis::pipe()
        .set(&keys[0], 1_000_000_000)
        .ignore()
        .hset_multiple(&keys[2], &[("begins", 0_i64), ("ends", 4_102_444_800_000), ("expires", 4_102_444_800_000)])
        .ignore()
        .query_async(&mut redis)
        .await
        .map_err(|e| format!("raw gate: {e}"))?;
    let url = redis::IntoConnectionInfo::into_connection_info(redis_url).map_err(|e| e.to_string())?;
    let (host, port) = match url.addr {
        redis::ConnectionAddr::Tcp(host, port) => (host, port),
        other => return Err(format!("raw gate: {other:?} is not a TCP address")),
    };
    let out = tokio::process::Command::new("redis-benchmark")
        .args(["-h", &host, "-p", &port.to_string(), "-c", "50", "-n", &calls.to_string(), "-r", "1000000000"])
        .args(["--csv", "EVALSHA", &sha, "6"])
        .args(&keys)
        // The voucher, the channel, the sold-out event, the shards, the layout; one grab:
        // user, order, result, token.
        .args(["1", &format!("{base}:events"), "s", "1", &LAYOUT_VERSION.to_string()])
        .args(["__rand_int__", "__rand_int__", "q", ""])
        .output()
        .await
        .map_err(|e| format!("raw gate: running redis-benchmark: {e}"))?;
    let _: redis::RedisResult<()> = redis::cmd("DEL").arg(&keys).query_async(&mut redis).await;
    let csv = String::from_utf8_lossy(&out.stdout);
    let rps = csv.lines().nth(1).and_then(|l| l.split("\",\"").nth(1)).and_then(|r| r.trim_matches('"').parse().ok());
    rps.ok_or_else(|| format!("raw gate: no figure in redis-benchmark's output: {csv}"))
}
