//! Grabs of one sale that arrive together go to the gate together: one script call
//! decides up to [`MOST_PER_CALL`] of them (`lua/grab.lua`), so its fixed cost, a
//! script's start, its reads of the sale and its clock, the command's parsing and its
//! reply, is paid once for all. In a storm that cost was most of Redis's CPU per
//! grant, and one Redis core is what bounds a sale (figures: `docs/testing.md`).
//!
//! Nothing waits to fill a call: a grab that finds fewer than [`CALLS_PER_SALE`] calls
//! of its sale under way starts one at once, alone if it is alone; only grabs that
//! arrive while that many are under way wait for one to end, and the next call takes
//! all that waited. So a quiet sale answers as fast as before, and a busy one sends
//! fewer, larger calls. Each call is a task of its own: a shopper who leaves does not
//! strand the grabs riding with theirs, and a grab whose caller gave up before its
//! call was sent is left out of it.

use super::gate::{self, Ask, Bucket, Verdict};
use crate::backend::Backend;
use redis::RedisResult;
use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};
use tokio::sync::oneshot;

/// Grabs one gate call decides at most (about 4 µs of Redis each: a call of them all
/// holds Redis for a quarter of a millisecond).
pub const MOST_PER_CALL: usize = 64;
/// Gate calls of one sale under way at once from this process: two keep Redis busy
/// while one call's answer travels back, and let the grabs of a storm gather in
/// large calls (with four, the bench's granted storm cost Redis 8.3–8.5 µs a grant;
/// with two, 7.0–7.5).
pub const CALLS_PER_SALE: usize = 2;
/// A call not answered within this is given up: its grabs answer an error (as a grab's
/// own deadline would), and the next grabs start calls of their own.
const CALL_DEADLINE: Duration = Duration::from_secs(2);

/// Gate calls, registered on first use and kept (as the grab's own metrics are).
static CALLS_METRIC: std::sync::OnceLock<metrics::Counter> = std::sync::OnceLock::new();

/// The sales (each bucket of a sale of several shards apart) with grabs waiting or
/// under way in this process.
#[derive(Default)]
pub struct Batches {
    sales: Mutex<HashMap<Bucket, Queue>>,
    /// Gate calls made, for the grabs per call (`seckill_gate_calls_total` too).
    made: AtomicU64,
}

/// One sale's (bucket's) grabs waiting for a call, and its calls under way.
#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    calls: usize,
}

struct Waiting {
    ask: Ask,
    answer: oneshot::Sender<RedisResult<Verdict>>,
}

impl Batches {
    /// Decides `ask`, a grab in `sale` (its shopper's bucket), in the next call of
    /// that bucket; `backend` makes the call if this grab starts it.
    pub async fn decide(self: &Arc<Self>, backend: &Backend, sale: Bucket, ask: Ask) -> RedisResult<Verdict> {
        let (answer, answered) = oneshot::channel();
        let starts = {
            let mut sales = self.sales.lock().unwrap_or_else(|e| e.into_inner());
            let queue = sales.entry(sale).or_default();
            queue.waiting.push(Waiting { ask, answer });
            let starts = queue.calls < CALLS_PER_SALE;
            queue.calls += usize::from(starts);
            starts
        };
        if starts {
            tokio::spawn(calls(self.clone(), backend.clone(), sale));
        }
        answered.await.unwrap_or_else(|_| Err((redis::ErrorKind::IoError, "the gate call was dropped").into()))
    }

    /// Gate calls this process made.
    pub fn calls(&self) -> u64 {
        self.made.load(Ordering::Relaxed)
    }

    /// The next grabs of `sale` for a call (those whose caller still waits), or
    /// `None`: nothing waits, and the caller's call ends (the sale's entry with it
    /// when it was the last).
    fn next(&self, sale: Bucket) -> Option<Vec<Waiting>> {
        let mut sales = self.sales.lock().unwrap_or_else(|e| e.into_inner());
        let queue = sales.get_mut(&sale)?;
        queue.waiting.retain(|w| !w.answer.is_closed());
        if queue.waiting.is_empty() {
            queue.calls -= 1;
            if queue.calls == 0 {
                sales.remove(&sale);
            }
            return None;
        }
        let take = queue.waiting.len().min(MOST_PER_CALL);
        self.made.fetch_add(1, Ordering::Relaxed);
        CALLS_METRIC.get_or_init(|| metrics::counter!("seckill_gate_calls_total")).increment(1);
        Some(queue.waiting.drain(..take).collect())
    }
}

/// One call slot of `sale`: calls the gate on what waits until nothing does.
async fn calls(batches: Arc<Batches>, backend: Backend, sale: Bucket) {
    let keys = backend.bucket_keys(sale);
    while let Some(batch) = batches.next(sale) {
        let asks: Vec<&Ask> = batch.iter().map(|w| &w.ask).collect();
        let call = gate::grab_all(&backend, &keys, (sale.voucher_id, sale.shards), &asks);
        let decided = tokio::time::timeout(CALL_DEADLINE, call).await;
        match decided {
            Ok(Ok(verdicts)) => {
                for (waiting, verdict) in batch.into_iter().zip(verdicts) {
                    let _ = waiting.answer.send(Ok(verdict));
                }
            }
            Ok(Err(e)) => {
                for waiting in batch {
                    let _ = waiting.answer.send(Err(copy(&e)));
                }
            }
            Err(_) => {
                for waiting in batch {
                    let _ = waiting.answer.send(Err((redis::ErrorKind::IoError, "the gate did not answer").into()));
                }
            }
        }
    }
}

/// The same error for each grab of a failed call (`RedisError` is not `Clone`).
fn copy(e: &redis::RedisError) -> redis::RedisError {
    (e.kind(), "the gate call failed", e.to_string()).into()
}
