//! Order ids: 64 bits, sign bit 0, 31 bits of seconds since 2020-01-01 UTC, then
//! 32 bits of a per-day Redis counter (`<ns>:icr:order:<yyyymmdd>`).
//!
//! The counter is taken in blocks (`lua/order_ids.lua`), so a grab needs no extra
//! round trip. A block belongs to the UTC day it was taken on and is dropped when
//! the day changes: within a day the counter is unique (a value handed back unused is
//! taken again only in a later second: another id), across days the timestamp is.
//!
//! Two rules keep ids unique when Redis loses the counter: a counter made afresh
//! starts from the time of day (40 values per elapsed millisecond), ahead of what was
//! taken before unless more than that was taken on average, blocks included, between
//! the lost counter's start and the loss; and a counter found behind what this process
//! already took jumps past it by [`LOSS_MARGIN`]. A reused value would also have to
//! meet the same second to repeat an id.
//!
//! A failover (or a restart from a file missing its last second) loses the counter's
//! last writes instead: the counter is behind the blocks processes took just before,
//! which they still use. So the counter keeps which master took its last block, and
//! when (its replication id and clock, beside it in its slot): a promoted replica, or
//! a restarted master, has a replication id of its own, finds the counter written
//! under another, and jumps it [`LOSS_MARGIN`] ahead, plus [`PER_MS_OF_DAY`] values per
//! millisecond since that block (a second failover soon after the first loses the
//! first jump's blocks too), past what the masters before handed out and it never
//! received. With replicas required
//! (`SECKILL_WAIT_REPLICAS`) a block is also used once they hold it (`WAIT`, in one
//! pipeline with the take), so a failover rarely loses one at all; one they do not
//! hold within [`MOST_BLOCK_WAIT_MS`] (a replica down, or cut off) is used all the
//! same, and counted: grabs go on without a replica, as they do while saving waits for
//! one (`docs/operations.md`, "Replicas and failover").
//!
//! A master lost with the counter would stop every sale's grabs, on every master,
//! once the ids in hand ran out, until its replica took over (a node timeout or
//! two). So each day has a spare counter too, on the master across the slot space
//! (`layout::order_id_spare`), with values of its own: the main counter's stop below
//! [`SPARE_BASE`] (the script refuses a block past them, and writes nothing), the
//! spare's start there. A process draws from the spare when a refill from the main
//! counter fails (or the main one is exhausted), and keeps to it while the main one
//! fails, trying the main one again every [`MAIN_REST`] on the side, so no grab waits
//! on a dead master's timeout. Each counter keeps the rules above on its own, and
//! their values never meet, so the two together hand out no value twice. The spare
//! is the weaker: made afresh it starts from [`SPARE_PER_MS_OF_DAY`] values per
//! millisecond of the day, so a spare lost outright (a restart without persistence)
//! soon after a storm drew on it may start behind blocks still held, and only the
//! processes that held spare blocks jump past them; it is meant for the minutes of
//! an outage. (Processes of builds before the spare count the main counter up to
//! `u32::MAX`: during a rolling upgrade on a day whose main counter passed
//! [`SPARE_BASE`], which takes billions of ids, they could meet the spare's values.)
//!
//! A grab the gate refused hands its id's value back ([`OrderIds::unused`]), to be
//! taken again in a later second.
//!
//! The next block is fetched in the background when half of what
//! is in hand is used, so grabs do not queue behind a refill, and no lock is held
//! across a Redis call. One refill runs at a time: the grabs that open a storm all
//! find the hand empty, and they wait for one block instead of each fetching its own.

use crate::backend::{invoke_then_wait, layout::ORDER_IDS_KEPT, RedisConn, Replicas, ScriptCall};
use chrono::{DateTime, NaiveDate, Utc};
use futures::{
    future::{BoxFuture, Shared},
    FutureExt,
};
use redis::{ErrorKind, RedisError, Script};
use std::{
    collections::VecDeque,
    ops::RangeInclusive,
    sync::{Arc, Mutex},
    time::Duration,
};

/// How long a day's counter is kept in Redis.
const COUNTER_TTL_SECS: i64 = ORDER_IDS_KEPT.as_secs() as i64;

/// How far a counter that may have lost values jumps: past this process's highest
/// value when found behind it, or ahead when last written under another master.
pub const LOSS_MARGIN: u64 = 1 << 24;

/// Counter values per millisecond of the day for a main counter made afresh: 40 000
/// a second, beyond what one gate grants, and a whole day (3.46 billion) fits below
/// [`SPARE_BASE`].
const PER_MS_OF_DAY: u64 = 40;

/// Where the spare counter's values begin in a day's 32 bits: its 537 million values
/// are the top eighth, and the main counter's 3.76 billion stop below them.
pub const SPARE_BASE: u64 = (1 << 32) - (1 << 29);

/// Values per millisecond of the day for a spare counter made afresh: 5 000 a
/// second (a whole day is 432 million, of its 537 million). It is drawn from only
/// while the main counter fails, and ids also carry their second.
const SPARE_PER_MS_OF_DAY: u64 = 5;

/// How often a process whose main counter fails tries it again, on the side (a
/// failover takes a node timeout or two).
const MAIN_REST: Duration = Duration::from_secs(5);

/// Longest a refill may take before it is given up and the next grab starts another:
/// the grabs waiting for it have answered `unavailable` by then (their own deadline
/// is as long), and a fetch stuck on a dead connection must not hold up the next.
/// Half of it goes to each counter, the one tried first and then the other.
const REFILL_DEADLINE: Duration = Duration::from_secs(2);

/// Longest a server's blocks wait for replicas (`SECKILL_WAIT_REPLICAS_MS`, when
/// shorter): a replica in sync holds a block within a millisecond or two, and grabs
/// that find no id in hand (a storm's first, midnight's) wait for the block.
pub const MOST_BLOCK_WAIT_MS: u64 = 20;

/// Refused grabs' values kept to be taken again at most (a second's refusals, as
/// they wait for the next second); more are dropped.
const MOST_UNUSED: usize = 1 << 16;

/// 2020-01-01T00:00:00Z in Unix seconds.
pub const EPOCH_SECS: i64 = 1_577_836_800;

/// Most digits an order id sent back to the server may have: an id is a positive
/// `i64`, at most 19 decimal digits.
pub const MAX_DIGITS: usize = 19;

/// The form of an order id a caller sends (in the API document, from [`MAX_DIGITS`]).
pub fn pattern() -> String {
    format!("^[0-9]{{1,{MAX_DIGITS}}}$")
}

/// An order id as a caller sent it in `order_id`: 1 to [`MAX_DIGITS`] decimal digits
/// ([`pattern`]; one past the largest id, which no order has, reads as -1: no order
/// is found for it); anything else is `invalid_input`.
pub fn parse(sent: &str) -> crate::error::AppResult<i64> {
    let digits = (1..=MAX_DIGITS).contains(&sent.len()) && sent.bytes().all(|b| b.is_ascii_digit());
    if !digits {
        return Err(crate::error::AppError::invalid(format!("order_id must be 1 to {MAX_DIGITS} decimal digits."))
            .on("order_id"));
    }
    Ok(sent.parse::<u64>().ok().and_then(|id| i64::try_from(id).ok()).unwrap_or(-1))
}

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

/// Hands out order ids from blocks of the per-day counters.
pub struct OrderIds {
    namespace: String,
    block_size: u32,
    /// Replicas that must hold a block before its ids are used.
    replicas: Replicas,
    script: Script,
    hand: Mutex<Hand>,
    /// The spare counter's key for a day, once worked out (thousands of hashes).
    spare_key: Mutex<Option<(NaiveDate, String)>>,
}

/// One of a day's two counters (module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Counter {
    Main,
    Spare,
}

impl Counter {
    fn index(self) -> usize {
        self as usize
    }

    fn other(self) -> Self {
        match self {
            Counter::Main => Counter::Spare,
            Counter::Spare => Counter::Main,
        }
    }

    /// Where its values begin in the day's 32 bits: a value it counts is this plus
    /// its count.
    fn base(self) -> u64 {
        match self {
            Counter::Main => 0,
            Counter::Spare => SPARE_BASE,
        }
    }

    /// How many values it counts (its count stays below this).
    fn size(self) -> u64 {
        match self {
            Counter::Main => SPARE_BASE,
            Counter::Spare => (1 << 32) - SPARE_BASE,
        }
    }

    fn per_ms_of_day(self) -> u64 {
        match self {
            Counter::Main => PER_MS_OF_DAY,
            Counter::Spare => SPARE_PER_MS_OF_DAY,
        }
    }
}

/// The blocks this process holds for one day.
#[derive(Default)]
struct Hand {
    day: Option<NaiveDate>,
    blocks: VecDeque<RangeInclusive<u64>>,
    /// Values handed back unused (their grabs were refused), oldest first, each with
    /// the second its id carried. One is taken again only in a later second, so the id
    /// it makes is new even if Redis granted the first after all: a grab sent again
    /// on a new connection (the first died with its answer, or the cluster moved it)
    /// may be refused by a Redis that never saw what the first did. At most
    /// [`MOST_UNUSED`].
    unused: VecDeque<(u64, i64)>,
    /// The highest count taken today from each counter ([`Counter::index`], as it
    /// counts: the spare's from 0): the floor passed to the script.
    highest: [u64; 2],
    /// Values left in `blocks`, kept as they change: at the start of a storm every
    /// grab in flight finds the hand empty and fetches a block of its own, and
    /// summing hundreds of blocks on every take cost more than the rest of it.
    left: u64,
    /// The fetch of the next block, while one runs. It runs in a task of its own, so
    /// a grab that gives up waiting (its client went away) does not cancel it.
    refill: Option<Refill>,
    /// When the main counter last failed this process, while it fails: refills draw
    /// from the spare, and the main one is tried again [`MAIN_REST`] after, on the
    /// side ([`OrderIds::probe`]).
    main_failed: Option<std::time::Instant>,
    /// A try of the main counter on the side is under way.
    probing: bool,
}

/// A fetch of one block that any number of grabs can wait for.
type Refill = Shared<BoxFuture<'static, Result<(), RefillError>>>;

/// Why a refill failed, kept so every grab waiting for it gets the error.
#[derive(Clone, Debug)]
struct RefillError(ErrorKind, String);

impl From<RefillError> for RedisError {
    fn from(RefillError(kind, detail): RefillError) -> Self {
        RedisError::from((kind, "order id block", detail))
    }
}

impl Hand {
    /// The moment an id is made at, read from the clock as `read`: never before the
    /// day the hand holds. A grab that read the clock just before midnight and took
    /// the lock after another had moved the hand to the new day (or a clock stepped
    /// back across midnight) would otherwise move it back, dropping the new day's
    /// blocks and its floor; it makes its id at the new day's first second instead,
    /// from that day's counter.
    fn now(&self, read: DateTime<Utc>) -> DateTime<Utc> {
        match self.day {
            Some(day) if read.date_naive() < day => day.and_time(chrono::NaiveTime::MIN).and_utc(),
            _ => read,
        }
    }

    fn for_day(&mut self, day: NaiveDate) {
        if self.day != Some(day) {
            *self = Hand { day: Some(day), ..Hand::default() };
        }
    }

    /// A value for an id made in second `now`.
    fn take(&mut self, now: i64) -> Option<u64> {
        if let Some(&(value, second)) = self.unused.front() {
            if second < now {
                self.unused.pop_front();
                return Some(value);
            }
        }
        while let Some(block) = self.blocks.front_mut() {
            if let Some(value) = block.next() {
                self.left -= 1;
                return Some(value);
            }
            self.blocks.pop_front();
        }
        None
    }

    /// Keeps `value`, of an id of `day` made in `second`, to be taken again.
    fn put_back(&mut self, day: NaiveDate, value: u64, second: i64) {
        if self.day == Some(day) && self.unused.len() < MOST_UNUSED {
            self.unused.push_back((value, second));
        }
    }

    /// Adds `block` (values of the day's 32 bits) drawn from `counter` on `day`.
    fn add(&mut self, day: NaiveDate, counter: Counter, block: RangeInclusive<u64>) {
        if self.day == Some(day) {
            let highest = &mut self.highest[counter.index()];
            *highest = (*highest).max(block.end().saturating_sub(counter.base()));
            self.left += block.end().saturating_sub(*block.start()) + u64::from(!block.is_empty());
            self.blocks.push_back(block);
        }
    }

    /// What the next refill takes from: the counter it tries first, and each counter's
    /// floor.
    fn refill_from(&self) -> (Counter, [u64; 2]) {
        (self.first_counter(), self.highest)
    }

    /// The counter the next refill tries first: the spare while the main one fails.
    fn first_counter(&self) -> Counter {
        match self.main_failed {
            Some(_) => Counter::Spare,
            None => Counter::Main,
        }
    }

    /// Whether the main counter, failing, is due to be tried again on the side: once
    /// [`MAIN_REST`] has passed since its last failure, one try at a time.
    fn probe_due(&self) -> bool {
        !self.probing && self.main_failed.is_some_and(|at| at.elapsed() >= MAIN_REST)
    }

    /// What a try of the main counter found: it answers again, or still fails.
    fn main_answered(&mut self, answered: bool) {
        let was_failing = self.main_failed.is_some();
        self.main_failed = (!answered).then(std::time::Instant::now);
        if answered && was_failing {
            tracing::warn!("order ids: the day's counter answers again: drawing from it");
        }
        if !answered && !was_failing {
            tracing::warn!("order ids: the day's counter failed: drawing from its spare until it answers");
        }
    }
}

impl OrderIds {
    pub fn new(namespace: &str, block_size: u32) -> Self {
        Self {
            namespace: namespace.to_owned(),
            block_size: block_size.max(1),
            replicas: Replicas::default(),
            script: crate::backend::layout::order_ids_script(),
            hand: Mutex::new(Hand::default()),
            spare_key: Mutex::default(),
        }
    }

    /// The same, using a block once `replicas` hold it, or their wait ran out (a server
    /// waits [`MOST_BLOCK_WAIT_MS`] at most). The connection passed to
    /// [`OrderIds::next`] then waits for them (`WAIT` holds up the commands sent after
    /// it): one of its own (`Backend::id_blocks`).
    pub fn waiting_for(self, replicas: Replicas) -> Self {
        Self { replicas, ..self }
    }

    /// Hands back `id`, taken by [`OrderIds::next`] for a grab the gate refused: its
    /// counter value is taken again in a later second (a new id). Only grants use up
    /// the day's counter, then (and a second's refusals), so refusals asked again and
    /// again (grabs before the start, a buyer asking again) cannot run it out and stop
    /// every sale until midnight. Not for a grab whose answer did not come.
    pub fn unused(&self, id: i64) {
        let (at, value) = decompose(id);
        self.lock().put_back(at.date_naive(), u64::from(value), at.timestamp());
    }

    /// The next id. Waits for Redis only when nothing is in hand (the first grab of
    /// a day, or grabs outrunning the background refill).
    pub async fn next(self: &Arc<Self>, redis: &RedisConn) -> redis::RedisResult<i64> {
        loop {
            // Read again after a wait: a grab that waited across midnight takes
            // from the new day's blocks, not the old day's.
            let refill = {
                let mut hand = self.lock();
                let now = hand.now(Utc::now());
                let today = now.date_naive();
                hand.for_day(today);
                if hand.probe_due() {
                    hand.probing = true;
                    self.probe(today, redis, hand.highest[Counter::Main.index()]);
                }
                if let Some(value) = hand.take(now.timestamp()) {
                    if hand.left <= u64::from(self.block_size / 2) && hand.refill.is_none() {
                        hand.refill = Some(self.refill(today, redis, hand.refill_from()));
                    }
                    // Blocks past u32::MAX are refused (`fetch`), so this never truncates.
                    return Ok(compose(now.timestamp(), value as u32));
                }
                let from = hand.refill_from();
                hand.refill.get_or_insert_with(|| self.refill(today, redis, from)).clone()
            };
            refill.await?;
        }
    }

    /// Starts fetching a block in a task of its own, from the counter given first
    /// or else the other, above each one's floor; it lands in the hand, and any
    /// number of grabs can wait for it.
    fn refill(self: &Arc<Self>, today: NaiveDate, redis: &RedisConn, from: (Counter, [u64; 2])) -> Refill {
        let (ids, mut redis) = (self.clone(), redis.clone());
        let task = tokio::spawn(async move {
            let fetched = ids.draw(&mut redis, today, from).await;
            let mut hand = ids.lock();
            if hand.day == Some(today) {
                hand.refill = None;
            }
            match fetched {
                Ok((counter, block)) => {
                    hand.add(today, counter, block);
                    Ok(())
                }
                Err(e) => {
                    // Once a second at most: with Redis down, every grab's refill fails.
                    static SAID: crate::backend::outage::Throttle = crate::backend::outage::Throttle::new();
                    if let Some(left_out) = SAID.allow() {
                        tracing::warn!(left_out, "order ids: refill failed: {e}");
                    }
                    Err(RefillError(e.kind(), e.to_string()))
                }
            }
        });
        task.map(|joined| joined.unwrap_or_else(|e| Err(RefillError(ErrorKind::IoError, e.to_string()))))
            .boxed()
            .shared()
    }

    /// Tries the main counter again on the side while refills draw from the spare: a
    /// block it answers lands in the hand and refills turn back to it; a failure
    /// waits [`MAIN_REST`] more. No grab waits for it.
    fn probe(self: &Arc<Self>, today: NaiveDate, redis: &RedisConn, floor: u64) {
        let (ids, mut redis) = (self.clone(), redis.clone());
        tokio::spawn(async move {
            let fetched = ids.fetch_within(&mut redis, today, Counter::Main, floor).await;
            let mut hand = ids.lock();
            if hand.day != Some(today) {
                return;
            }
            hand.probing = false;
            hand.main_answered(fetched.is_ok());
            if let Ok(block) = fetched {
                hand.add(today, Counter::Main, block);
            }
        });
    }

    /// A block from `first` or, when that fails (down, cut off, exhausted), from the
    /// other counter, each given half of [`REFILL_DEADLINE`]. What the main counter
    /// did is remembered: refills keep to the spare while it fails.
    async fn draw(
        &self,
        redis: &mut RedisConn,
        day: NaiveDate,
        (first, floors): (Counter, [u64; 2]),
    ) -> redis::RedisResult<(Counter, RangeInclusive<u64>)> {
        let mut failed = None;
        for counter in [first, first.other()] {
            let fetched = self.fetch_within(redis, day, counter, floors[counter.index()]).await;
            self.main_did(day, counter, fetched.is_ok());
            match fetched {
                Ok(block) => {
                    if counter == Counter::Spare {
                        metrics::counter!("seckill_order_id_spare_blocks_total").increment(1);
                    }
                    return Ok((counter, block));
                }
                Err(e) => failed = Some(e),
            }
        }
        Err(failed.unwrap_or_else(|| RedisError::from((ErrorKind::IoError, "order id block: no counter tried"))))
    }

    /// [`fetch`](Self::fetch) within half of [`REFILL_DEADLINE`] (and the replicas'
    /// wait): a counter whose node does not answer leaves time for the other.
    async fn fetch_within(
        &self,
        redis: &mut RedisConn,
        day: NaiveDate,
        counter: Counter,
        floor: u64,
    ) -> redis::RedisResult<RangeInclusive<u64>> {
        let deadline = REFILL_DEADLINE / 2 + Duration::from_millis(self.replicas.wait_ms);
        tokio::time::timeout(deadline, self.fetch(redis, day, counter, floor))
            .await
            .unwrap_or_else(|_| Err(RedisError::from((ErrorKind::IoError, "order id block: Redis did not answer"))))
    }

    /// Notes what the main counter did for a refill of `day` (nothing for the spare's).
    fn main_did(&self, day: NaiveDate, counter: Counter, answered: bool) {
        let mut hand = self.lock();
        if counter == Counter::Main && hand.day == Some(day) {
            hand.main_answered(answered);
        }
    }

    /// The key of `counter` on `day`.
    fn key(&self, day: NaiveDate, counter: Counter) -> String {
        use crate::backend::layout::{order_id_counter, order_id_spare};
        let yyyymmdd = day.format("%Y%m%d").to_string();
        if counter == Counter::Main {
            return order_id_counter(&self.namespace, &yyyymmdd);
        }
        let mut known = self.spare_key.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*known {
            Some((of, key)) if *of == day => key.clone(),
            _ => {
                let key = order_id_spare(&self.namespace, &yyyymmdd);
                *known = Some((day, key.clone()));
                key
            }
        }
    }

    /// One block of `counter` on `day` from Redis, as values of the day's 32 bits,
    /// held by the replicas required.
    async fn fetch(
        &self,
        redis: &mut RedisConn,
        day: NaiveDate,
        counter: Counter,
        floor: u64,
    ) -> redis::RedisResult<RangeInclusive<u64>> {
        let key = self.key(day, counter);
        let mark = crate::backend::layout::order_id_master(&self.namespace, &key);
        let mut take = ScriptCall::new(&self.script, &[&key, &mark], 6, 60);
        take.arg(self.block_size).arg(floor).arg(LOSS_MARGIN).arg(COUNTER_TTL_SECS).arg(counter.per_ms_of_day());
        take.arg(counter.size());
        let Replicas { want, wait_ms } = self.replicas;
        let (last, how): (u64, i64) = if want == 0 {
            take.invoke(redis).await?
        } else {
            let (taken, have): (Vec<(u64, i64)>, u32) = invoke_then_wait(&[take], redis, want, wait_ms).await?;
            if have < want {
                metrics::counter!("seckill_replica_waits_short_total").increment(1);
            }
            taken.first().copied().ok_or((ErrorKind::TypeError, "order id block: no answer"))?
        };
        said_how(how);
        if last >= counter.size() {
            return Err(redis::RedisError::from((
                redis::ErrorKind::ExtensionError,
                "order id counter exhausted for today",
            )));
        }
        let last = counter.base() + last;
        Ok(last - u64::from(self.block_size) + 1..=last)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Hand> {
        // A panic while holding this lock leaves the hand consistent (plain fields).
        self.hand.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Says how `lua/order_ids.lua` took a block (its second answer): a jump past a
/// failover's lost blocks is counted and logged; a script refused the master's
/// replication id (`INFO`, left out of the app's Redis ACL) is logged at most once a
/// second, as ids then go unguarded against a failover.
fn said_how(how: i64) {
    use crate::backend::outage::Throttle;
    match how {
        1 => {
            metrics::counter!("seckill_order_id_jumps_total").increment(1);
            tracing::warn!(
                "order ids: the day's counter was last written under another Redis master (a failover or \
                 restart since): it jumped ahead of any block that master handed out"
            );
        }
        -1 => {
            static SAID: Throttle = Throttle::new();
            if SAID.allow().is_some() {
                tracing::error!(
                    "order ids: Redis refused INFO to the order-id script, so a failover that loses the counter's \
                     last blocks could hand their ids out again: allow INFO to the app's Redis user"
                );
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_id_sent_is_digits_and_nothing_else() {
        assert_eq!(parse("4611686018427387905").unwrap(), 4_611_686_018_427_387_905);
        assert_eq!(parse("007").unwrap(), 7);
        assert_eq!(parse("9999999999999999999").unwrap(), -1, "past the largest id: no order has it");
        for bad in ["", " 7", "7 ", "+7", "-7", "7.0", "1e3", "12345678901234567890", "٣"] {
            assert_eq!(parse(bad).unwrap_err().param.as_deref(), Some("order_id"), "{bad:?}");
        }
        assert_eq!(pattern(), "^[0-9]{1,19}$");
    }

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

    /// A hand for `day` holding `blocks`.
    fn hand_of(day: NaiveDate, blocks: &[RangeInclusive<u64>]) -> Hand {
        let mut hand = Hand::default();
        hand.for_day(day);
        for block in blocks {
            hand.add(day, Counter::Main, block.clone());
        }
        hand
    }

    #[test]
    fn the_hand_counts_what_is_left() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 24).unwrap();
        let mut hand = hand_of(day, &[1..=3, 10..=10]);
        assert_eq!(hand.left, 4);
        let taken: Vec<u64> = std::iter::from_fn(|| hand.take(0)).collect();
        assert_eq!(taken, [1, 2, 3, 10]);
        assert_eq!(hand.left, 0);
        hand.add(day.succ_opt().unwrap(), Counter::Main, 20..=29);
        assert_eq!(hand.left, 0, "a block of another day is dropped");
    }

    /// The two counters share the day's 32 bits without meeting, and a spare block
    /// raises the spare's floor, in its own count, not the main one's.
    #[test]
    fn the_spare_counter_has_values_of_its_own() {
        assert_eq!(Counter::Main.base() + Counter::Main.size(), Counter::Spare.base());
        assert_eq!(Counter::Spare.base() + Counter::Spare.size(), 1 << 32);
        let day_ms = 86_400_000;
        for counter in [Counter::Main, Counter::Spare] {
            let made_late = counter.per_ms_of_day() * day_ms + LOSS_MARGIN;
            assert!(made_late < counter.size(), "{counter:?}: a counter made afresh late in the day has room");
        }
        let day = NaiveDate::from_ymd_opt(2026, 11, 30).unwrap();
        let mut hand = hand_of(day, &[1..=10]);
        hand.add(day, Counter::Spare, SPARE_BASE + 101..=SPARE_BASE + 110);
        assert_eq!((hand.highest, hand.left), ([10, 110], 20));
        let taken: Vec<u64> = std::iter::from_fn(|| hand.take(0)).collect();
        assert_eq!(taken.len(), 20);
        assert!(taken[10..].iter().all(|&v| v > SPARE_BASE && v <= u64::from(u32::MAX)));
    }

    /// After the main counter fails, refills draw from the spare until a try on the
    /// side, one at a time and [`MAIN_REST`] after the last failure, finds it
    /// answering.
    #[test]
    fn refills_keep_to_the_spare_until_the_main_counter_answers_again() {
        let mut hand = Hand::default();
        assert_eq!((hand.first_counter(), hand.probe_due()), (Counter::Main, false));
        hand.main_answered(false);
        assert_eq!((hand.first_counter(), hand.probe_due()), (Counter::Spare, false), "not tried again at once");
        let Some(long_ago) = std::time::Instant::now().checked_sub(MAIN_REST) else { return };
        hand.main_failed = Some(long_ago);
        assert!(hand.probe_due(), "tried again after the rest");
        hand.probing = true;
        assert!(!hand.probe_due(), "one try at a time");
        hand.probing = false;
        hand.main_answered(false);
        assert_eq!((hand.first_counter(), hand.probe_due()), (Counter::Spare, false), "a failed try rests again");
        hand.main_answered(true);
        assert_eq!((hand.first_counter(), hand.probe_due()), (Counter::Main, false));
    }

    #[test]
    fn values_handed_back_are_taken_again_in_a_later_second() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 24).unwrap();
        let mut hand = hand_of(day, &[1..=3]);
        let first = hand.take(100).unwrap();
        hand.put_back(day, first, 100);
        hand.put_back(day.succ_opt().unwrap(), 99, 100);
        assert_eq!(hand.take(100), Some(2), "not in the second its id was made in");
        assert_eq!(hand.take(101), Some(1), "in a later one, first");
        assert_eq!(hand.take(101), Some(3));
        assert_eq!((hand.take(102), hand.left), (None, 0), "another day's value was dropped");
    }

    #[test]
    fn a_clock_read_before_midnight_never_moves_the_hand_back_a_day() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 24).unwrap();
        let mut hand = hand_of(day, &[1..=3]);
        hand.highest = [99, 0];
        let late = NaiveDate::from_ymd_opt(2026, 11, 23).unwrap().and_hms_milli_opt(23, 59, 59, 999).unwrap().and_utc();
        let now = hand.now(late);
        assert_eq!(now, day.and_hms_opt(0, 0, 0).unwrap().and_utc(), "the hand's day's first second");
        hand.for_day(now.date_naive());
        assert_eq!((hand.take(now.timestamp()), hand.highest), (Some(1), [99, 0]), "its blocks and floor kept");
        let later = day.and_hms_opt(12, 0, 0).unwrap().and_utc();
        assert_eq!(hand.now(later), later, "a clock read in the hand's day or after is the moment");
    }

    #[test]
    fn largest_counter_and_far_future_stay_positive() {
        let far = EPOCH_SECS + 0x7fff_ffff; // year 2088
        assert!(compose(far, u32::MAX) > 0);
    }
}
