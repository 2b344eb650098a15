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
use redis::RedisResult;
use std::collections::HashMap;

/// The lag counts undelivered entries up to this many (a storm's backlog reads as
/// this many until it is below).
pub const LAG_COUNTED_UP_TO: i64 = 1_000;

/// The figures of each voucher in `rows`, in their order: one call per bucket of its
/// sale (each on its own node), their counts summed.
pub async fn read(backend: &Backend, rows: &[VoucherRow]) -> RedisResult<Vec<SaleFigures>> {
    let script = &backend.scripts.sample;
    let buckets = rows.iter().flat_map(|row| row.buckets().map(|b| row.bucket(b)));
    let calls = buckets.map(|bucket| {
        let (mut redis, keys) = (backend.redis.clone(), backend.bucket_keys(bucket));
        async move {
            let SaleKeys { left, buyers, orders, dlq, refused, window, .. } = &*keys;
            let mut call = script.key(left);
            call.key(buyers).key(orders).key(dlq).key(refused).key(window).arg(GROUP).arg(LAG_COUNTED_UP_TO);
            call.invoke_async::<HashMap<String, i64>>(&mut redis).await
        }
    });
    let mut answers = futures::future::try_join_all(calls).await?.into_iter();
    let figures = rows.iter().map(|row| {
        let of_buckets: Vec<HashMap<String, i64>> = answers.by_ref().take(row.shards() as usize).collect();
        let mut sale = figures(row, &summed(&of_buckets));
        if of_buckets.len() > 1 {
            sale.buckets_left = of_buckets.iter().map(|b| b.get("stock").copied().unwrap_or(-1)).collect();
        }
        sale
    });
    Ok(figures.collect())
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
