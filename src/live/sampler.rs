//! One sampler per process: a few times a second, every live voucher's numbers in
//! one pipelined Redis round trip (`lua/sample.lua`, whose answer this module owns)
//! and one SQL query, whatever the number of viewers.

use super::{hub::Hub, Snapshot, VoucherLive};
use crate::{
    backend::{Backend, BackendError},
    sale::{
        keys::{SaleKeys, GROUP},
        sold_out::SoldOutFlags,
    },
    shutdown::{self, Shutdown},
    voucher::store as vouchers,
};
use redis::RedisResult;
use std::{collections::HashMap, sync::Arc, time::Duration};

/// How often the numbers are read.
pub const EVERY: Duration = Duration::from_millis(250);
/// Vouchers stay on the dashboard this long after their sale ended.
const SHOWN_AFTER_END_MS: i64 = 10 * 60 * 1000;

/// One voucher's numbers as `lua/sample.lua` reads them, by name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct RedisFigures {
    /// -1 when Redis does not hold the voucher.
    stock: i64,
    granted: i64,
    stream_length: i64,
    /// -1 when unknown.
    lag: i64,
    pending: i64,
    dead_letters: i64,
    refused: i64,
}

impl RedisFigures {
    /// The script answers name/value pairs; a name it did not send reads as unknown.
    fn from_pairs(pairs: &HashMap<String, i64>) -> Self {
        let get = |name: &str, missing: i64| pairs.get(name).copied().unwrap_or(missing);
        Self {
            stock: get("stock", -1),
            granted: get("granted", 0),
            stream_length: get("stream_length", 0),
            lag: get("lag", -1),
            pending: get("pending", 0),
            dead_letters: get("dead_letters", 0),
            refused: get("refused", 0),
        }
    }
}

/// Counters of the previous sample, for rates.
#[derive(Clone, Copy)]
struct Prev {
    at_ms: i64,
    granted: i64,
    persisted: i64,
    refused: i64,
    refused_locally: u64,
}

pub fn spawn(
    backend: Backend,
    hub: Arc<Hub>,
    flags: Arc<SoldOutFlags>,
    shutdown: Shutdown,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut prev = HashMap::new();
        let mut ticks = shutdown::interval(EVERY);
        let mut failing = false;
        while shutdown.tick(&mut ticks).await {
            match sample(&backend, &flags, &mut prev).await {
                Ok(snapshot) => {
                    failing = false;
                    hub.publish_snapshot(snapshot);
                }
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!("live sampler: {e}");
                }
                Err(_) => {}
            }
        }
    })
}

async fn sample(
    backend: &Backend,
    flags: &SoldOutFlags,
    prev: &mut HashMap<i64, Prev>,
) -> Result<Snapshot, BackendError> {
    let rows = vouchers::live(&backend.db, SHOWN_AFTER_END_MS).await?;
    let keys: Vec<Arc<SaleKeys>> = rows.iter().map(|r| backend.keys(r.id)).collect();
    let figures = read_figures(backend, &keys).await?;
    let at_ms = chrono::Utc::now().timestamp_millis();
    let vouchers = rows
        .iter()
        .zip(figures)
        .map(|(row, n)| {
            let voucher_id = row.id;
            let refused_locally = flags.refused_locally(voucher_id);
            record(voucher_id, &n, flags.is_flagged(voucher_id));
            let persisted = row.stock - row.stock_left;
            let now = Prev { at_ms, granted: n.granted, persisted, refused: n.refused, refused_locally };
            let before = prev.insert(voucher_id, now).unwrap_or(now);
            let secs = ((at_ms - before.at_ms) as f64 / 1000.0).max(0.001);
            let rate = |a: i64, b: i64| if a == b { 0.0 } else { (a - b).max(0) as f64 / secs };
            VoucherLive {
                voucher_id,
                total: row.stock,
                stock: n.stock,
                granted: n.granted,
                persisted,
                stream_length: n.stream_length,
                lag: n.lag,
                pending: n.pending,
                dead_letters: n.dead_letters,
                grabs_per_s: rate(now.granted, before.granted),
                refused_per_s: rate(now.refused, before.refused),
                refused_locally_per_s: rate(refused_locally as i64, before.refused_locally as i64),
                orders_per_s: rate(now.persisted, before.persisted),
                unpaid: persisted - row.paid,
                paid: row.paid,
                cancelled: row.cancelled,
                sold_out: flags.is_flagged(voucher_id),
            }
        })
        .collect();
    Ok(Snapshot { at_ms, vouchers })
}

/// Hands one voucher's figures to the metrics recorder (`/metrics`).
fn record(voucher_id: i64, n: &RedisFigures, sold_out: bool) {
    let voucher = voucher_id.to_string();
    metrics::gauge!("seckill_redis_stock", "voucher" => voucher.clone()).set(n.stock as f64);
    metrics::gauge!("seckill_stream_lag", "voucher" => voucher.clone()).set(n.lag as f64);
    metrics::gauge!("seckill_stream_pending", "voucher" => voucher.clone()).set(n.pending as f64);
    metrics::gauge!("seckill_dead_letters", "voucher" => voucher.clone()).set(n.dead_letters as f64);
    metrics::gauge!("seckill_sold_out_flag", "voucher" => voucher).set(if sold_out { 1.0 } else { 0.0 });
}

/// Runs `lua/sample.lua` for each voucher, all at once: each call stays in its
/// voucher's slot, and the multiplexed connections write them back to back.
async fn read_figures(backend: &Backend, keys: &[Arc<SaleKeys>]) -> RedisResult<Vec<RedisFigures>> {
    let script = &backend.scripts.sample;
    let calls = keys.iter().map(|k| {
        let mut redis = backend.redis.clone();
        async move {
            let mut call = script.key(&k.stock);
            call.key(&k.buyers).key(&k.orders).key(&k.dlq).key(&k.refused).arg(GROUP);
            call.invoke_async::<HashMap<String, i64>>(&mut redis).await
        }
    });
    let answers = futures::future::try_join_all(calls).await?;
    Ok(answers.iter().map(RedisFigures::from_pairs).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_read_by_name() {
        let pairs: HashMap<String, i64> =
            [("granted", 3), ("stock", 7), ("refused", 9)].into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        let f = RedisFigures::from_pairs(&pairs);
        assert_eq!((f.stock, f.granted, f.refused, f.lag, f.pending), (7, 3, 9, -1, 0));
    }
}
