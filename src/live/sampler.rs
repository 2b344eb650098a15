//! One sampler per process: a few times a second, every live voucher's numbers in
//! one pipelined Redis round trip and one SQL query, whatever the number of viewers.

use super::{hub::Hub, Snapshot, VoucherLive};
use crate::{
    sale::{keys::SaleKeys, sold_out::SoldOutFlags},
    state::AppState,
};
use std::{collections::HashMap, sync::Arc, time::Duration};
use tokio::{sync::watch, time::MissedTickBehavior};

/// How often the numbers are read.
pub const EVERY: Duration = Duration::from_millis(250);
/// Vouchers stay on the dashboard this long after their sale ended.
const SHOWN_AFTER_END_MS: i64 = 10 * 60 * 1000;

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
    state: AppState,
    hub: Arc<Hub>,
    flags: Arc<SoldOutFlags>,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut prev = HashMap::new();
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut failing = false;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return,
            }
            match sample(&state, &flags, &mut prev).await {
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

#[derive(Debug, thiserror::Error)]
enum SampleError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

async fn sample(
    state: &AppState,
    flags: &SoldOutFlags,
    prev: &mut HashMap<i64, Prev>,
) -> Result<Snapshot, SampleError> {
    let since = chrono::Utc::now().timestamp_millis() - SHOWN_AFTER_END_MS;
    let rows: Vec<(i64, i64, i64)> =
        sqlx::query_as("SELECT id, stock, stock_left FROM vouchers WHERE ends_at > ? ORDER BY id")
            .bind(since)
            .fetch_all(&state.db)
            .await?;
    let keys: Vec<SaleKeys> = rows.iter().map(|r| SaleKeys::new(&state.namespace, r.0)).collect();
    let mut redis = state.redis.clone();
    let numbers = state.scripts.sample(&mut redis, &keys).await?;
    let at_ms = chrono::Utc::now().timestamp_millis();
    let vouchers = rows
        .iter()
        .zip(numbers)
        .map(|(&(voucher_id, total, stock_left), n)| {
            let refused_locally = flags.refused_locally(voucher_id);
            let now = Prev { at_ms, granted: n[1], persisted: total - stock_left, refused: n[6], refused_locally };
            let before = prev.insert(voucher_id, now).unwrap_or(now);
            let secs = ((at_ms - before.at_ms) as f64 / 1000.0).max(0.001);
            let rate = |a: i64, b: i64| if a == b { 0.0 } else { (a - b).max(0) as f64 / secs };
            VoucherLive {
                voucher_id,
                total,
                stock: n[0],
                granted: n[1],
                persisted: now.persisted,
                stream_length: n[2],
                lag: n[3],
                pending: n[4],
                dead_letters: n[5],
                grabs_per_s: rate(now.granted, before.granted),
                refused_per_s: rate(now.refused, before.refused),
                refused_locally_per_s: rate(refused_locally as i64, before.refused_locally as i64),
                orders_per_s: rate(now.persisted, before.persisted),
                sold_out: flags.is_flagged(voucher_id),
            }
        })
        .collect();
    Ok(Snapshot { at_ms, vouchers })
}
