//! A sale's figures, computed in one place for the dashboard's sampler and for
//! `sale_stats`: from the voucher's row (stock, stock left, paid, cancelled: counters
//! every write keeps, so no figure counts rows) and one `lua/sample.lua` call per
//! voucher in Redis (stock, buyers, stream, consumer group, dead letters, refusals),
//! every voucher's call sent at once. The script's answer is read here, by name. What
//! this process's sold-out flags say is the caller's to add.

use super::SaleFigures;
use crate::{
    backend::{
        layout::{SaleKeys, GROUP},
        Backend,
    },
    voucher::store::VoucherRow,
};
use redis::{ErrorKind, RedisError, RedisResult};
use std::collections::HashMap;

/// The lag counts undelivered entries up to this many (a storm's backlog reads as
/// this many until it is below).
pub const LAG_COUNTED_UP_TO: i64 = 1_000;

/// How long a round waits for a bucket's figures. A node answers in well under a
/// millisecond; one stopped, cut off or failing over answers nothing until the
/// connection's timeout (seconds), and the sales whose buckets live elsewhere must not
/// wait for it.
pub const DEADLINE: std::time::Duration = std::time::Duration::from_secs(1);

/// What a read given up at [`DEADLINE`] reads as.
pub fn no_answer() -> RedisError {
    RedisError::from((ErrorKind::IoError, "no answer in time"))
}

/// The figures of each voucher in `rows`, in their order: one call per bucket of its
/// sale (each on its own node), their counts summed. An error when any bucket did not
/// answer (`sale_stats`: the operator asked for that sale).
pub async fn read(backend: &Backend, rows: &[VoucherRow]) -> RedisResult<Vec<SaleFigures>> {
    let answers = bucket_answers(backend, rows).await.into_iter().collect::<RedisResult<Vec<_>>>()?;
    let mut answers = answers.into_iter();
    Ok(rows.iter().map(|row| of_buckets(row, answers.by_ref().take(row.shards() as usize).collect())).collect())
}

/// As [`read`], but each voucher on its own: `None` for one whose buckets did not all
/// answer (a node down or stopped: the dashboard's other sales go on; a review,
/// 2026-12-02: one stopped master froze every sale's feed); with them, the first
/// failure met, for the log.
pub async fn read_each(backend: &Backend, rows: &[VoucherRow]) -> (Vec<Option<SaleFigures>>, Option<RedisError>) {
    let mut answers = bucket_answers(backend, rows).await.into_iter();
    let mut failure = None;
    let each = rows.iter().map(|row| {
        let buckets: RedisResult<Vec<_>> = answers.by_ref().take(row.shards() as usize).collect();
        buckets.map_err(|e| failure = failure.take().or(Some(e))).ok().map(|buckets| of_buckets(row, buckets))
    });
    let each: Vec<_> = each.collect();
    (each, failure)
}

/// Every bucket's `lua/sample.lua` answer, in the rows' order, sent at once; one not
/// in within [`DEADLINE`] reads as a timeout.
async fn bucket_answers(backend: &Backend, rows: &[VoucherRow]) -> Vec<RedisResult<HashMap<String, i64>>> {
    let script = &backend.scripts.sample;
    let buckets = rows.iter().flat_map(|row| row.buckets().map(|b| row.bucket(b)));
    let calls = buckets.map(|bucket| {
        let (mut redis, keys) = (backend.redis.clone(), backend.bucket_keys(bucket));
        async move {
            let SaleKeys { left, buyers, orders, dlq, refused, window, .. } = &*keys;
            let mut call = script.key(left);
            call.key(buyers).key(orders).key(dlq).key(refused).key(window).arg(GROUP).arg(LAG_COUNTED_UP_TO);
            tokio::time::timeout(DEADLINE, call.invoke_async(&mut redis)).await.unwrap_or_else(|_| Err(no_answer()))
        }
    });
    futures::future::join_all(calls).await
}

/// A voucher's figures from its buckets' answers.
fn of_buckets(row: &VoucherRow, buckets: Vec<HashMap<String, i64>>) -> SaleFigures {
    let mut sale = figures(row, &summed(&buckets));
    if buckets.len() > 1 {
        sale.buckets_left = buckets.iter().map(|b| b.get("stock").copied().unwrap_or(-1)).collect();
    }
    sale
}

/// A voucher's figures from its row alone, for one whose buckets did not answer: what
/// Redis holds unknown, and the orders saved granted (each was).
pub fn of_row(row: &VoucherRow) -> SaleFigures {
    let sale = figures(row, &HashMap::new());
    SaleFigures { granted: sale.persisted, ..sale }
}

/// The figures of a sale's buckets as one: counts summed (unknown when any bucket's
/// is), the window's fields as bucket 0 holds them (every bucket holds a copy).
fn summed(buckets: &[HashMap<String, i64>]) -> HashMap<String, i64> {
    let Some((first, rest)) = buckets.split_first() else { return HashMap::new() };
    let mut sum = first.clone();
    for bucket in rest {
        for name in ["stock", "granted", "stream_length", "lag", "pending", "dead_letters", "refused"] {
            let (a, b) = (sum.get(name).copied(), bucket.get(name).copied());
            let unknown = |n: Option<i64>| n.is_none_or(|n| n < 0) && matches!(name, "stock" | "lag");
            let total = if unknown(a) || unknown(b) { -1 } else { a.unwrap_or(0) + b.unwrap_or(0) };
            sum.insert(name.to_owned(), total);
        }
    }
    sum
}

/// A voucher's figures from its row and the script's name/value pairs; a name the
/// script did not send reads as unknown, or as none.
fn figures(row: &VoucherRow, pairs: &HashMap<String, i64>) -> SaleFigures {
    let get = |name: &str| pairs.get(name).copied();
    let known = |name: &str| get(name).filter(|&n| n >= 0);
    let persisted = row.stock - row.stock_left;
    SaleFigures {
        voucher_id: row.id,
        stock: row.stock,
        left: known("stock"),
        granted: get("granted").unwrap_or(0),
        persisted,
        unpaid: (persisted - row.paid).max(0),
        paid: row.paid,
        cancelled: row.cancelled,
        stream_length: get("stream_length").unwrap_or(0),
        lag: known("lag"),
        pending: get("pending").unwrap_or(0),
        dead_letters: get("dead_letters").unwrap_or(0),
        refused: get("refused").unwrap_or(0),
        // The gate's window when Redis holds it, else the database's row.
        paused: known("paused").map_or(row.is_paused(), |p| p == 1),
        begins_at_ms: known("begins").unwrap_or(row.begins_at),
        ends_at_ms: known("ends").unwrap_or(row.ends_at),
        // The row's once kept: Redis's is a rebuilt sale's later one (as the report).
        sold_out_at_ms: row.sold_out_at.or(known("sold_out_at")),
        ..SaleFigures::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_read_by_name_and_from_the_row() {
        let row = VoucherRow {
            id: 4,
            title: String::new(),
            stock: 10,
            stock_left: 3,
            begins_at: 0,
            ends_at: 0,
            paid: 2,
            cancelled: 1,
            ..VoucherRow::default()
        };
        let pairs: HashMap<String, i64> = [("granted", 8), ("stock", 2), ("refused", 9), ("lag", -1), ("paused", 1)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        let f = figures(&row, &pairs);
        assert_eq!((f.left, f.granted, f.refused, f.lag, f.pending), (Some(2), 8, 9, None, 0));
        assert_eq!((f.stock, f.persisted, f.unpaid, f.paid, f.cancelled), (10, 7, 5, 2, 1));
        let gone = figures(&row, &[("stock".to_owned(), -1)].into_iter().collect());
        assert_eq!(gone.left, None, "Redis does not hold the voucher");
        assert!(f.paused && !gone.paused, "paused as the gate says, else as the row says");
        // Redis lost the window of a paused sale: the row says (before, the script's
        // 0 for a missing window read as "not paused", and the shop's card opened).
        let paused_row = VoucherRow { paused: 1, ..row.clone() };
        let lost = figures(&paused_row, &[("stock".to_owned(), -1), ("paused".to_owned(), -1)].into_iter().collect());
        assert!(lost.paused, "as the row says, when Redis lacks the window");
        assert_eq!((f.ends_at_ms, gone.ends_at_ms), (row.ends_at, row.ends_at));
        assert_eq!(gone.begins_at_ms, row.begins_at);
    }
}
