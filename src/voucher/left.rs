//! Units left of each voucher, as the shop and the operator see them: Redis's count,
//! or the database's when Redis cannot say in time.

use super::store::VoucherRow;
use crate::{backend::Backend, error::AppResult};

/// How long the list waits for Redis's counts before showing the database's. Redis
/// answers in well under a millisecond; one that stalls (a failover, a slow script)
/// must not hold up the shop page, which renders the list before it is sent.
const STOCK_DEADLINE: std::time::Duration = std::time::Duration::from_millis(250);

/// Units left of each voucher: Redis's count (the sum over its buckets), or the
/// database's where Redis does not hold every bucket or does not answer for it within
/// [`STOCK_DEADLINE`] (a node failing over). GETs sent at once, not an MGET: the keys
/// live in different Cluster slots.
pub async fn units_left(backend: &Backend, rows: &[VoucherRow]) -> AppResult<Vec<i64>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let gets = rows.iter().flat_map(|r| r.buckets().map(|b| redis::Cmd::get(&backend.bucket_keys(r.bucket(b)).left)));
    let counts = tokio::time::timeout(STOCK_DEADLINE, backend.redis.query_each::<Option<i64>>(gets)).await;
    let counts = counts.unwrap_or_else(|_| {
        tracing::warn!("voucher list: Redis did not answer within {STOCK_DEADLINE:?}; showing the database's stock");
        Vec::new()
    });
    let mut counts = counts.into_iter();
    let left = rows.iter().map(|row| {
        // Each of the row's counts taken before they are summed: the next row's follow.
        let buckets: Vec<Option<i64>> = row.buckets().map(|_| counts.next().and_then(|c| c.ok().flatten())).collect();
        buckets.into_iter().sum::<Option<i64>>().unwrap_or(row.stock_left)
    });
    Ok(left.collect())
}
