//! Listens to the sale events on Redis pub/sub: keeps this process's sold-out flags
//! and forwards every event to the live feeds at once.

use super::{hub::Hub, LiveEvent};
use crate::sale::sold_out::SoldOutFlags;
use futures::StreamExt;
use std::{sync::Arc, time::Duration};
use tokio::sync::watch;

/// Subscribes (so no event after this call is missed), then listens in the
/// background until `stop`, reconnecting after a dropped connection.
pub async fn start(
    client: redis::Client,
    channel: String,
    flags: Arc<SoldOutFlags>,
    hub: Arc<Hub>,
    mut stop: watch::Receiver<bool>,
) -> redis::RedisResult<tokio::task::JoinHandle<()>> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(&channel).await?;
    Ok(tokio::spawn(async move {
        loop {
            {
                let mut messages = pubsub.on_message();
                loop {
                    tokio::select! {
                        msg = messages.next() => match msg {
                            Some(msg) => handle(&msg.get_payload::<String>().unwrap_or_default(), &flags, &hub),
                            None => break,
                        },
                        _ = stop.changed() => return,
                    }
                }
            }
            tracing::warn!("sale events: connection lost; reconnecting");
            pubsub = loop {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                    _ = stop.changed() => return,
                }
                if let Ok(mut p) = client.get_async_pubsub().await {
                    if p.subscribe(&channel).await.is_ok() {
                        break p;
                    }
                }
            };
            // Events may have been lost while disconnected: trust no flag.
            flags.clear_all();
        }
    }))
}

fn handle(payload: &str, flags: &SoldOutFlags, hub: &Hub) {
    let Some(event) = LiveEvent::parse(payload, chrono::Utc::now().timestamp_millis()) else {
        tracing::warn!(payload, "unknown sale event");
        return;
    };
    match (event.kind, event.voucher_id) {
        (super::EventKind::SoldOut, Some(v)) => flags.set(v),
        (super::EventKind::Restocked, Some(v)) => flags.clear(v),
        _ => {}
    }
    hub.publish_event(event);
}
