//! The event bus: sale events every process must hear of at once (a voucher sold out
//! or restocked, an order dead-lettered, a worker joined or left, a voucher changed),
//! carried by Redis pub/sub on one channel (`<namespace>:events`), and what this
//! process tells itself of what it did (an order granted, a voucher changed). Whoever
//! keeps state that an event changes subscribes ([`Subscriber`]): the sold-out flags
//! (`sale::sold_out`), the shared shop page (`server::page_cache`), the live feeds
//! (`live::hub`) and the worker's readers (`worker::Wakeups`). The bus knows none of
//! them; the server hands them to [`Bus::new`]. So a domain that makes a change tells
//! the bus, and never reaches into who keeps what.
//!
//! Pub/sub loses messages while a connection is down: after a reconnection every
//! subscriber is told it may have missed some ([`Subscriber::missed`]), and trusts
//! nothing it cached from them.

mod event;

pub use event::SaleEvent;

use crate::{
    backend::{Backend, RedisTarget},
    shutdown::Shutdown,
};
use futures::StreamExt;
use std::{sync::Arc, time::Duration};

/// What keeps state a sale event changes.
pub trait Subscriber: Send + Sync {
    /// `event` happened (heard at `at_ms`, Unix milliseconds).
    fn heard(&self, event: &SaleEvent, at_ms: i64);
    /// Events may have been lost (the subscription was made again).
    fn missed(&self);
}

/// This process's end of the bus: its subscribers, its name in the events it
/// publishes, and the steps of the sale-change count its own changes made.
pub struct Bus {
    /// Never 0: events of processes that name no origin read as 0.
    origin: u64,
    subscribers: Vec<Arc<dyn Subscriber>>,
    /// Values the sale-change count took from this process's bumps, until [`follow`]
    /// reads past them: its subscribers were told of those changes at once, so a
    /// step to one is not a change they missed (it dated the shop page a second time,
    /// for nothing).
    own_steps: std::sync::Mutex<std::collections::BTreeSet<i64>>,
}

/// Own steps kept at most (a follower that stopped reading must not make them grow).
const MOST_OWN_STEPS: usize = 1_024;

impl Bus {
    pub fn new(subscribers: Vec<Arc<dyn Subscriber>>) -> Self {
        Self { origin: rand::random::<u64>().max(1), subscribers, own_steps: Default::default() }
    }

    /// This process, as the events it publishes name it.
    pub fn origin(&self) -> u64 {
        self.origin
    }

    /// Tells this process's subscribers, at once, of something done here. An event
    /// that is also published names this process ([`SaleEvent::origin`]), so it is
    /// not told twice when it comes back.
    pub fn tell_here(&self, event: &SaleEvent) {
        let at_ms = chrono::Utc::now().timestamp_millis();
        self.subscribers.iter().for_each(|s| s.heard(event, at_ms));
    }

    /// An event heard on the channel: told to every subscriber unless it came from here.
    fn heard(&self, payload: &str) {
        let Some(event) = SaleEvent::parse(payload) else {
            tracing::warn!(payload, "unknown sale event");
            return;
        };
        if event.origin() != Some(self.origin) {
            self.tell_here(&event);
        }
    }

    fn missed(&self) {
        self.subscribers.iter().for_each(|s| s.missed());
    }

    /// This process bumped the sale-change count to `value` (and told its subscribers
    /// of the change already).
    pub fn bumped(&self, value: i64) {
        let mut own = self.own_steps.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        own.insert(value);
        if own.len() > MOST_OWN_STEPS {
            own.pop_first();
        }
    }

    /// Whether the count moved from `seen` to `now` by this process's bumps alone (a
    /// count that went back, Redis having lost it, did not); forgets the steps up to
    /// `now`.
    fn only_own_steps(&self, seen: i64, now: i64) -> bool {
        let mut own = self.own_steps.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let only_own = now == seen || (now > seen && own.range(seen + 1..=now).count() as i64 == now - seen);
        *own = own.split_off(&now.saturating_add(1));
        only_own
    }
}

/// Tells every process (through the sale events channel) of something done here.
/// Best effort: what was done stands either way, and what listens copes with a
/// missed message (a page out of date for a moment, a dashboard line missing).
pub async fn publish(backend: &Backend, event: &SaleEvent) {
    let sent: redis::RedisResult<i64> =
        redis::AsyncCommands::publish(&mut backend.redis.clone(), &*backend.events_channel, event).await;
    if let Err(e) = sent {
        tracing::warn!("announcing {event:?}: {e}");
    }
}

/// Subscribes (so no event after this call is missed), then listens in the
/// background until shutdown, telling the bus every event in the order heard, and
/// reconnecting after a dropped connection (on a cluster, to the next node: classic
/// pub/sub reaches every node).
pub async fn listen(
    redis: Arc<RedisTarget>,
    channel: String,
    bus: Arc<Bus>,
    shutdown: Shutdown,
) -> redis::RedisResult<tokio::task::JoinHandle<()>> {
    let mut pubsub = redis.pubsub().await?;
    pubsub.subscribe(&channel).await?;
    Ok(tokio::spawn(async move {
        let stopped = shutdown.wait();
        tokio::pin!(stopped);
        loop {
            {
                let mut messages = pubsub.on_message();
                loop {
                    tokio::select! {
                        msg = messages.next() => match msg {
                            Some(msg) => bus.heard(&msg.get_payload::<String>().unwrap_or_default()),
                            None => break,
                        },
                        _ = &mut stopped => return,
                    }
                }
            }
            tracing::warn!("sale events: connection lost; reconnecting");
            pubsub = loop {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                    _ = &mut stopped => return,
                }
                if let Ok(mut p) = redis.pubsub().await {
                    if p.subscribe(&channel).await.is_ok() {
                        break p;
                    }
                }
            };
            bus.missed();
        }
    }))
}

/// How often [`follow`] reads the sale-change count.
pub const CHANGES_READ_EVERY: Duration = Duration::from_millis(250);

/// Reads the sale-change count (`key`, bumped by every operator change to a sale, after
/// Redis holds the change) every [`CHANGES_READ_EVERY`] until shutdown, and tells every
/// subscriber it may have missed events whenever another process moved it (this
/// process's own steps, [`Bus::bumped`], were told here at once). So a process whose
/// subscription dropped the change's event (partitioned from pub/sub, or not yet
/// subscribed) still follows the change within a fraction of a second: its caches
/// check the sale-change count, not only a message they hope to get.
pub fn follow(
    mut redis: crate::backend::RedisConn,
    key: String,
    bus: Arc<Bus>,
    shutdown: Shutdown,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut seen: Option<Option<i64>> = None;
        let mut rounds = crate::shutdown::interval(CHANGES_READ_EVERY);
        while shutdown.tick(&mut rounds).await {
            let Ok(now) = redis::AsyncCommands::get::<_, Option<i64>>(&mut redis, &key).await else { continue };
            // A count Redis does not hold reads as 0 (its first bump makes it 1).
            if seen.is_some_and(|seen| !bus.only_own_steps(seen.unwrap_or(0), now.unwrap_or(0))) {
                bus.missed();
            }
            seen = Some(now);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn a_step_of_the_count_is_missed_unless_this_process_made_it() {
        let bus = Bus::new(Vec::new());
        assert!(bus.only_own_steps(3, 3), "no step");
        bus.bumped(4);
        assert!(bus.only_own_steps(3, 3), "no step, with a step of its own to come");
        assert!(bus.only_own_steps(3, 4), "its own step");
        assert!(!bus.only_own_steps(4, 5), "another's step");
        bus.bumped(7);
        assert!(!bus.only_own_steps(5, 7), "its own and another's");
        assert!(!bus.only_own_steps(7, 8), "7 was forgotten once read past");
        bus.bumped(9);
        assert!(!bus.only_own_steps(9, 0), "the count went back: Redis lost it");
        for value in 0..2_000 {
            bus.bumped(value);
        }
        assert!(bus.own_steps.lock().unwrap().len() <= MOST_OWN_STEPS, "bounded");
    }

    #[derive(Default)]
    struct Heard(Mutex<Vec<SaleEvent>>);

    impl Subscriber for Heard {
        fn heard(&self, event: &SaleEvent, _at_ms: i64) {
            self.0.lock().unwrap().push(event.clone());
        }
        fn missed(&self) {}
    }

    #[test]
    fn a_change_made_here_is_told_once_and_others_when_heard() {
        let heard = Arc::new(Heard::default());
        let bus = Bus::new(vec![heard.clone()]);
        let changed = |origin| SaleEvent::VoucherChanged { voucher_id: 7, origin };
        bus.tell_here(&changed(bus.origin()));
        bus.heard(&changed(bus.origin()).encode());
        assert_eq!(heard.0.lock().unwrap().len(), 1, "its own event coming back is not told again");
        bus.heard(&changed(bus.origin().wrapping_add(1)).encode());
        bus.heard(&changed(0).encode());
        bus.heard(&SaleEvent::SoldOut { voucher_id: 7 }.encode());
        bus.heard("nonsense");
        assert_eq!(heard.0.lock().unwrap().len(), 4, "another process's, an older one's that names none, any other");
        assert_ne!(Bus::new(Vec::new()).origin(), 0);
    }
}
