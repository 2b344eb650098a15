//! The books: the final state of Redis and the database, read once after the quiet
//! period (every sale's units, buyers and orders, what is owed, each granted grab's
//! result asked again). The checker judges them.

use redis::AsyncCommands;
use seckill::testing::{Bucket, RedisConn, SaleKeys};
use std::collections::{HashMap, HashSet};

/// What the final state holds, read once everything settled.
pub struct Final {
    pub vouchers: Vec<VoucherState>,
    /// Order id → (voucher, user, status, pay deadline, paid at).
    pub orders: HashMap<i64, OrderRow>,
    /// Give-backs Redis still owes (cancelled orders' units), and batches of orders a
    /// dead worker committed and left for the sweeper to settle (`unsettled_batches`).
    pub owed: i64,
    /// Operators' stock changes Redis has not yet made (or replicas not yet held).
    pub changes_owed: i64,
    /// The database's clock when read (ms).
    pub db_now: i64,
    /// Each granted grab's result asked after the quiet period: order id → status.
    pub results: HashMap<String, String>,
    /// Sales whose order stream still holds entries not delivered or not acknowledged.
    pub undrained: Vec<String>,
}

#[derive(Debug, PartialEq)]
pub struct VoucherState {
    pub id: i64,
    pub stock: i64,
    pub stock_left: i64,
    pub redis_stock: Option<i64>,
    pub buyers: HashSet<i64>,
    pub given_back: HashSet<i64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OrderRow {
    pub voucher: i64,
    pub user: i64,
    pub status: String,
    pub pay_deadline: i64,
    pub paid_at: Option<i64>,
    /// When it was cancelled for its deadline (the sweeper).
    pub timed_out_at: Option<i64>,
}

impl Final {
    /// Whether two reads found the same books: every sale's units, buyers and
    /// give-backs, every order, what is owed and every grab's result. The stores are
    /// read one after the other, not at one instant, so only two reads that agree,
    /// with nothing left to happen, show the books as they are: an order timing out
    /// between the database's read and Redis's once made them disagree.
    pub fn same_books(&self, other: &Self) -> bool {
        self.vouchers == other.vouchers
            && self.orders == other.orders
            && (self.owed, self.changes_owed) == (other.owed, other.changes_owed)
            && self.results == other.results
            && self.undrained == other.undrained
    }

    /// Reads the database (one snapshot) and Redis (namespace `seckill`) for `vouchers`.
    pub async fn read(database_url: &str, redis_url: &str, vouchers: &[i64]) -> Result<Self, String> {
        sqlx::any::install_default_drivers();
        let e = |e: sqlx::Error| e.to_string();
        let db = sqlx::AnyPool::connect(database_url).await.map_err(e)?;
        let mut tx = db.begin().await.map_err(e)?;
        if database_url.starts_with("postgres") {
            // Every read below sees one moment (SQLite's transaction does already).
            sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ").execute(&mut *tx).await.map_err(e)?;
        }
        let mut units = Vec::new();
        for &id in vouchers {
            let (stock, stock_left, shards): (i64, i64, i64) =
                sqlx::query_as("SELECT stock, stock_left, shards FROM vouchers WHERE id = $1")
                    .bind(id)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(e)?;
            units.push((id, stock, stock_left, shards as u32));
        }
        type Row = (i64, i64, i64, String, i64, Option<i64>, Option<i64>);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT id, voucher_id, user_id, status, pay_deadline, paid_at, \
             CASE WHEN cancel_reason = 'timeout' THEN cancelled_at END FROM orders",
        )
        .fetch_all(&mut *tx)
        .await
        .map_err(e)?;
        let orders = rows
            .into_iter()
            .map(|(id, voucher, user, status, pay_deadline, paid_at, timed_out_at)| {
                (id, OrderRow { voucher, user, status, pay_deadline, paid_at, timed_out_at })
            })
            .collect();
        // Give-backs, and batches a dead worker left to the sweeper to settle.
        let owed: i64 = sqlx::query_scalar(
            "SELECT (SELECT COUNT(*) FROM restocks_owed) + (SELECT COUNT(*) FROM unsettled_batches)",
        )
        .fetch_one(&mut *tx)
        .await
        .map_err(e)?;
        let changes_owed: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM stock_changes WHERE applied IS NULL")
            .fetch_one(&mut *tx)
            .await
            .map_err(e)?;
        tx.rollback().await.map_err(e)?;
        let db_now = seckill::testing::db_clock::now_ms(&db).await.map_err(e)?;

        let mut redis = RedisConn::open(redis_url).await.map_err(|e| e.to_string())?;
        let (mut states, mut undrained_sales) = (Vec::new(), Vec::new());
        for (id, stock, stock_left, shards) in units {
            // A sale of several shards: its buckets' books, summed.
            let (mut redis_stock, mut buyers, mut given_back) = (Some(0), HashSet::new(), HashSet::new());
            for bucket in 0..shards {
                let keys = SaleKeys::of_bucket("seckill", Bucket { voucher_id: id, shards, bucket });
                let left: Option<i64> = redis.get(&keys.left).await.map_err(|e| e.to_string())?;
                redis_stock = redis_stock.zip(left).map(|(a, b)| a + b);
                let of_bucket: HashSet<i64> = redis.hkeys(&keys.buyers).await.map_err(|e| e.to_string())?;
                buyers.extend(of_bucket);
                let of_bucket: HashSet<i64> = redis.smembers(&keys.given_back).await.map_err(|e| e.to_string())?;
                given_back.extend(of_bucket);
                if let Some(left) = undrained(&mut redis, &keys.orders).await? {
                    undrained_sales.push(format!("sale {id} bucket {bucket}: {left}"));
                }
            }
            states.push(VoucherState { id, stock, stock_left, redis_stock, buyers, given_back });
        }
        Ok(Self {
            vouchers: states,
            orders,
            owed,
            changes_owed,
            db_now,
            results: HashMap::new(),
            undrained: undrained_sales,
        })
    }
}

/// What a sale's order stream still holds for the workers: entries delivered and not
/// acknowledged, or not delivered (the group's last delivered id behind the stream's
/// last). Read from the ids, not the group's `lag`, which Redis cannot always keep
/// right across a failover.
async fn undrained(redis: &mut RedisConn, stream: &str) -> Result<Option<String>, String> {
    let info: HashMap<String, redis::Value> =
        redis::cmd("XINFO").arg("STREAM").arg(stream).query_async(redis).await.map_err(|e| e.to_string())?;
    let last = match info.get("last-generated-id") {
        Some(redis::Value::BulkString(id)) => String::from_utf8_lossy(id).into_owned(),
        _ => return Ok(None),
    };
    let groups: Vec<HashMap<String, redis::Value>> =
        redis::cmd("XINFO").arg("GROUPS").arg(stream).query_async(redis).await.map_err(|e| e.to_string())?;
    let Some(group) = groups.first() else { return Ok(Some("no group".to_owned())) };
    let pending = match group.get("pending") {
        Some(redis::Value::Int(n)) => *n,
        _ => 0,
    };
    let delivered = match group.get("last-delivered-id") {
        Some(redis::Value::BulkString(id)) => String::from_utf8_lossy(id).into_owned(),
        _ => String::new(),
    };
    let behind = delivered != last;
    Ok((pending > 0 || behind).then(|| format!("{pending} pending, last delivered {delivered}, last added {last}")))
}
