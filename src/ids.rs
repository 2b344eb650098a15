//! Order ids: 64 bits, sign bit 0, 31 bits of seconds since 2020-01-01 UTC, then
//! 32 bits of a per-day Redis counter (`<ns>:icr:order:<yyyymmdd>`).
//!
//! The counter is taken in blocks (one `INCRBY` per block), so a grab needs no extra
//! round trip. A block belongs to the UTC day it was taken on and is dropped when
//! the day changes: within a day the counter is unique, across days the timestamp is.

use chrono::{DateTime, NaiveDate, Utc};
use redis::aio::ConnectionManager;
use tokio::sync::Mutex;

/// How long a day's counter is kept in Redis.
const COUNTER_TTL_SECS: i64 = 2 * 24 * 3600;

/// 2020-01-01T00:00:00Z in Unix seconds.
pub const EPOCH_SECS: i64 = 1_577_836_800;

/// Builds an id from a Unix time in seconds and a counter value.
pub fn compose(unix_secs: i64, counter: u32) -> i64 {
    let secs = (unix_secs - EPOCH_SECS) & 0x7fff_ffff;
    (secs << 32) | i64::from(counter)
}

/// The moment (to the second) and the counter value an id was built from.
pub fn decompose(id: i64) -> (DateTime<Utc>, u32) {
    let secs = (id >> 32) + EPOCH_SECS;
    let at = DateTime::from_timestamp(secs, 0).unwrap_or_default();
    (at, (id & 0xffff_ffff) as u32)
}

/// Hands out order ids from blocks of the per-day counter.
pub struct OrderIds {
    namespace: String,
    block_size: u32,
    block: Mutex<Block>,
}

#[derive(Default)]
struct Block {
    day: Option<NaiveDate>,
    next: u64,
    end: u64,
}

impl OrderIds {
    pub fn new(namespace: &str, block_size: u32) -> Self {
        Self { namespace: namespace.to_owned(), block_size: block_size.max(1), block: Mutex::new(Block::default()) }
    }

    /// The next id. Goes to Redis only when the block is used up or the day changed.
    pub async fn next(&self, redis: &mut ConnectionManager) -> redis::RedisResult<i64> {
        let now = Utc::now();
        let today = now.date_naive();
        let mut block = self.block.lock().await;
        if block.day != Some(today) || block.next > block.end {
            let key = format!("{}:icr:order:{}", self.namespace, today.format("%Y%m%d"));
            // The day's counter is needed for the day only; two days cover any clock skew.
            let (end,): (u64,) = redis::pipe()
                .cmd("INCRBY")
                .arg(&key)
                .arg(self.block_size)
                .cmd("EXPIRE")
                .arg(&key)
                .arg(COUNTER_TTL_SECS)
                .ignore()
                .query_async(redis)
                .await?;
            if end > u64::from(u32::MAX) {
                return Err(redis::RedisError::from((
                    redis::ErrorKind::ExtensionError,
                    "order id counter exhausted for today",
                )));
            }
            *block = Block { day: Some(today), next: end - u64::from(self.block_size) + 1, end };
        }
        let counter = block.next as u32;
        block.next += 1;
        Ok(compose(now.timestamp(), counter))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_timestamp_then_counter() {
        let at = EPOCH_SECS + 86_400 * 365 + 7;
        let id = compose(at, 42);
        assert!(id > 0, "sign bit stays 0");
        assert_eq!(id >> 32, 86_400 * 365 + 7);
        assert_eq!(id & 0xffff_ffff, 42);
        let (when, counter) = decompose(id);
        assert_eq!(when.timestamp(), at);
        assert_eq!(counter, 42);
    }

    #[test]
    fn ids_sort_by_time_then_counter() {
        let t = EPOCH_SECS + 1_000;
        assert!(compose(t, u32::MAX) < compose(t + 1, 0));
        assert!(compose(t, 1) < compose(t, 2));
    }

    #[test]
    fn largest_counter_and_far_future_stay_positive() {
        let far = EPOCH_SECS + 0x7fff_ffff; // year 2088
        assert!(compose(far, u32::MAX) > 0);
    }
}
