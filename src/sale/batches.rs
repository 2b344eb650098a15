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
//!
//! A call's grabs come from every serving runtime of the process (`server::runtimes`),
//! and waking a task of another runtime writes to that runtime's wake-up file, once per
//! task. So the answers are handed to each runtime's mailbox ([`mailbox`]) in one go,
//! at most one wake-up per runtime and call, and the mailbox answers its grabs on their
//! own thread. A grab made on a thread with no mailbox is answered directly.

use super::gate::{self, Ask, Bucket, Verdict};
use crate::backend::Backend;
use redis::RedisResult;
use std::{
    cell::Cell,
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};
use tokio::sync::{mpsc, oneshot};

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
    /// Answers handed to another runtime's mailbox.
    handed: AtomicU64,
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
    /// The mailbox of the runtime the grab waits on, if it has one.
    home: Option<&'static Mailbox>,
}

/// A grab's answer, to be given on the grab's own runtime.
type Delivery = (oneshot::Sender<RedisResult<Verdict>>, RedisResult<Verdict>);

/// Where a runtime takes the answers of its grabs decided by a call another made.
struct Mailbox {
    /// Tells mailboxes apart, to gather a call's answers by runtime.
    id: usize,
    deliveries: mpsc::UnboundedSender<Vec<Delivery>>,
}

thread_local! {
    /// The mailbox of the runtime on this thread (a serving thread runs one runtime).
    static HOME: Cell<Option<&'static Mailbox>> = const { Cell::new(None) };
}

/// Mailboxes made, for their ids.
static MAILBOXES: AtomicUsize = AtomicUsize::new(0);

/// The mailbox of the runtime it is spawned on: it answers the grabs waiting there
/// that another runtime's call decided, until the runtime ends. Spawned once by each
/// serving runtime, before it serves.
///
/// The mailbox's address is leaked, one per runtime started (a serving process keeps
/// its runtimes for life; a test process starts a few hundred), so that a grab notes
/// its runtime's mailbox without a shared count to bump on one core and drop on
/// another. A runtime that ended drops its receiver: handing to it fails, and the
/// call answers directly.
pub fn mailbox() -> impl std::future::Future<Output = ()> {
    let (deliveries, mut taken) = mpsc::unbounded_channel::<Vec<Delivery>>();
    let id = MAILBOXES.fetch_add(1, Ordering::Relaxed);
    let own: &'static Mailbox = Box::leak(Box::new(Mailbox { id, deliveries }));
    HOME.with(|home| home.set(Some(own)));
    async move {
        let _leaving = Leaving(id);
        while let Some(answers) = taken.recv().await {
            deliver(answers);
        }
    }
}

/// Dropped with a mailbox's task: the thread it leaves (its runtime ended, or is no
/// longer driven) stops naming it, so later grabs there are answered directly.
struct Leaving(usize);

impl Drop for Leaving {
    fn drop(&mut self) {
        HOME.with(|home| {
            if home.get().is_some_and(|m| m.id == self.0) {
                home.set(None);
            }
        });
    }
}

/// Gives each grab its answer (one whose caller left is skipped).
fn deliver(answers: Vec<Delivery>) {
    for (answer, verdict) in answers {
        let _ = answer.send(verdict);
    }
}

impl Batches {
    /// Decides `ask`, a grab in `sale` (its shopper's bucket), in the next call of
    /// that bucket; `backend` makes the call if this grab starts it.
    pub async fn decide(self: &Arc<Self>, backend: &Backend, sale: Bucket, ask: Ask) -> RedisResult<Verdict> {
        let (answer, answered) = oneshot::channel();
        let home = HOME.with(Cell::get);
        let starts = {
            let mut sales = self.sales.lock().unwrap_or_else(|e| e.into_inner());
            let queue = sales.entry(sale).or_default();
            queue.waiting.push(Waiting { ask, answer, home });
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

    /// Answers handed to the mailbox of another runtime than the call's.
    pub fn handed(&self) -> u64 {
        self.handed.load(Ordering::Relaxed)
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
        let verdicts = match decided {
            Ok(Ok(verdicts)) => verdicts.into_iter().map(Ok).collect(),
            Ok(Err(e)) => batch.iter().map(|_| Err(copy(&e))).collect(),
            Err(_) => {
                batch.iter().map(|_| Err((redis::ErrorKind::IoError, "the gate did not answer").into())).collect()
            }
        };
        answer(&batches, batch, verdicts);
    }
}

/// Gives a call's answers: those of grabs waiting on this runtime (or on a thread
/// with no mailbox) at once, the others gathered by runtime, one handing to each mailbox.
fn answer(batches: &Batches, batch: Vec<Waiting>, verdicts: Vec<RedisResult<Verdict>>) {
    let here = HOME.with(Cell::get).map(|m| m.id);
    let mut away: Vec<(&Mailbox, Vec<Delivery>)> = Vec::new();
    for (waiting, verdict) in batch.into_iter().zip(verdicts) {
        match waiting.home {
            Some(home) if Some(home.id) != here => match away.iter_mut().find(|(m, _)| m.id == home.id) {
                Some((_, answers)) => answers.push((waiting.answer, verdict)),
                None => away.push((home, vec![(waiting.answer, verdict)])),
            },
            _ => {
                let _ = waiting.answer.send(verdict);
            }
        }
    }
    for (mailbox, answers) in away {
        let count = answers.len() as u64;
        match mailbox.deliveries.send(answers) {
            Ok(()) => {
                batches.handed.fetch_add(count, Ordering::Relaxed);
            }
            // A runtime that ended has no grab waiting any more; given here all the same.
            Err(mpsc::error::SendError(answers)) => deliver(answers),
        }
    }
}

/// The same error for each grab of a failed call (`RedisError` is not `Clone`).
fn copy(e: &redis::RedisError) -> redis::RedisError {
    (e.kind(), "the gate call failed", e.to_string()).into()
}
