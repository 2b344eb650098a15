//! Warm-up: puts a voucher's stock, buyers and window into Redis and makes sure its
//! order stream has the worker's consumer group.

use super::store::{self, VoucherRow};
use crate::{
    sale::keys::{SaleKeys, GROUP},
    state::AppState,
};
use redis::aio::ConnectionManager;

#[derive(Debug, thiserror::Error)]
pub enum WarmError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

/// Loads the voucher into Redis unless Redis already holds it. Returns true when it
/// loaded it. Stock and buyers are rebuilt from the database, so a Redis that lost
/// its data comes back with what was persisted; a Redis that kept it is left alone.
pub async fn warm(state: &AppState, v: &VoucherRow) -> Result<bool, WarmError> {
    let keys = SaleKeys::new(&state.namespace, v.id);
    let mut redis = state.redis.clone();
    let buyers = store::buyers(&state.db, v.id).await?;
    let loaded = state.scripts.warm(&mut redis, &keys, v, &buyers).await?;
    ensure_group(&mut redis, &keys.orders).await?;
    Ok(loaded)
}

/// Creates the consumer group (and the stream) if missing, reading from the start,
/// so a fresh Redis never answers NOGROUP and no queued order is skipped.
pub async fn ensure_group(redis: &mut ConnectionManager, stream: &str) -> redis::RedisResult<()> {
    let created: redis::RedisResult<()> =
        redis::cmd("XGROUP").arg("CREATE").arg(stream).arg(GROUP).arg("0").arg("MKSTREAM").query_async(redis).await;
    match created {
        Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
        other => other,
    }
}

/// Warms every voucher whose sale is upcoming, running or just ended.
pub async fn warm_all(state: &AppState) -> Result<usize, WarmError> {
    let live = store::live(&state.db, 0).await?;
    for v in &live {
        warm(state, v).await?;
    }
    Ok(live.len())
}
