//! Listens to the sale events on Redis pub/sub: keeps this process's sold-out flags,
//! puts its shared shop page out of date when a voucher changed, and forwards the
//! other events to the live feeds at once.

use super::{hub::Hub, LiveEvent};
use crate::{
    backend::RedisTarget,
    sale::{events::SaleEvent, sold_out::SoldOutFlags},
    shutdown::Shutdown,
    voucher::Changes,
};
use futures::StreamExt;
use std::{sync::Arc, time::Duration};

/// Subscribes (so no event after this call is missed), then listens in the
/// background until shutdown, reconnecting after a dropped connection (on a cluster,
/// to the next node: classic pub/sub reaches every node).
pub async fn start(
    redis: Arc<RedisTarget>,
    channel: String,
    flags: Arc<SoldOutFlags>,
    changes: Arc<Changes>,
    hub: Arc<Hub>,
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
                            Some(msg) => handle(&msg.get_payload::<String>().unwrap_or_default(), &flags, &changes, &hub),
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
            // Events may have been lost while disconnected: trust no flag, nor the page.
            flags.clear_all();
            changes.note();
        }
    }))
}

fn handle(payload: &str, flags: &SoldOutFlags, changes: &Changes, hub: &Hub) {
    let Some(event) = SaleEvent::parse(payload) else {
        tracing::warn!(payload, "unknown sale event");
        return;
    };
    match event {
        SaleEvent::SoldOut { voucher_id } => flags.set(voucher_id),
        SaleEvent::Restocked { voucher_id } => flags.clear(voucher_id),
        SaleEvent::VoucherChanged { origin, .. } => changes.heard(origin),
        _ => {}
    }
    if let Some(event) = LiveEvent::from_sale(event, chrono::Utc::now().timestamp_millis()) {
        hub.publish_event(event);
    }
}
