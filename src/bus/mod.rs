//! The event bus: sale events every process must hear of at once (a voucher sold out
//! or restocked, an order dead-lettered, a worker joined or left, a voucher changed),
//! carried by Redis pub/sub on one channel (`<namespace>:events`). Whoever keeps state
//! that an event changes subscribes ([`Subscriber`]): the sold-out flags
//! (`sale::sold_out`), the shared shop page (`server::page_cache`) and the live feeds
//! (`live::hub`). The bus knows none of them; the server hands them to [`listen`].
//!
//! Pub/sub loses messages while a connection is down: after a reconnection every
//! subscriber is told it may have missed some ([`Subscriber::missed`]), and trusts
//! nothing it cached from them.

mod event;

pub use event::SaleEvent;

use crate::{backend::RedisTarget, shutdown::Shutdown};
use futures::StreamExt;
use std::{sync::Arc, time::Duration};

/// What keeps state a sale event changes.
pub trait Subscriber: Send + Sync {
    /// `event` happened (heard at `at_ms`, Unix milliseconds).
    fn heard(&self, event: &SaleEvent, at_ms: i64);
    /// Events may have been lost (the subscription was made again).
    fn missed(&self);
}

/// Subscribes (so no event after this call is missed), then listens in the
/// background until shutdown, telling each subscriber every event in the order
/// heard, and reconnecting after a dropped connection (on a cluster, to the next
/// node: classic pub/sub reaches every node).
pub async fn listen(
    redis: Arc<RedisTarget>,
    channel: String,
    subscribers: Vec<Arc<dyn Subscriber>>,
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
                            Some(msg) => deliver(&msg.get_payload::<String>().unwrap_or_default(), &subscribers),
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
            subscribers.iter().for_each(|s| s.missed());
        }
    }))
}

/// How often [`follow`] reads the sales version.
pub const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// Reads the sales version (`key`, bumped by every operator change to a sale, after
/// Redis holds the change) every [`FOLLOW_EVERY`] until shutdown, and tells every
/// subscriber it may have missed events whenever it moved. So a process whose
/// subscription dropped the change's event (partitioned from pub/sub, or not yet
/// subscribed) still follows the change within a fraction of a second: its caches
/// check a version, not only a message they hope to get.
pub fn follow(
    mut redis: crate::backend::RedisConn,
    key: String,
    subscribers: Vec<Arc<dyn Subscriber>>,
    shutdown: Shutdown,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut seen: Option<Option<i64>> = None;
        let mut rounds = crate::shutdown::interval(FOLLOW_EVERY);
        while shutdown.tick(&mut rounds).await {
            let Ok(now) = redis::AsyncCommands::get::<_, Option<i64>>(&mut redis, &key).await else { continue };
            if seen.is_some_and(|seen| seen != now) {
                subscribers.iter().for_each(|s| s.missed());
            }
            seen = Some(now);
        }
    })
}

fn deliver(payload: &str, subscribers: &[Arc<dyn Subscriber>]) {
    let Some(event) = SaleEvent::parse(payload) else {
        tracing::warn!(payload, "unknown sale event");
        return;
    };
    let at_ms = chrono::Utc::now().timestamp_millis();
    subscribers.iter().for_each(|s| s.heard(&event, at_ms));
}
