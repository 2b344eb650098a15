//! Taking over entries other consumers left idle (their process died, or this one
//! failed on them), and telling apart those delivered too often to be tried again as
//! a batch.

use super::WorkerSettings;
use crate::backend::{
    layout::{SaleKeys, GROUP},
    BackendError, RedisConn,
};
use crate::orders::entry::Entry;
use redis::{streams::StreamPendingCountReply, AsyncCommands};
use std::{collections::HashSet, sync::Arc, time::Duration};
use tokio::time::Instant;

/// Entries this consumer just took over, to handle.
#[derive(Default)]
pub(super) struct Claimed {
    /// Delivered fewer than `max_deliveries` times: persisted with the others.
    pub fresh: Vec<Entry>,
    /// Delivered `max_deliveries` times or more: one last try each, on its own.
    pub worn: Vec<Entry>,
}

/// One reader's recovery: when it is due, and what it claims.
pub(super) struct Recovery {
    keys: Arc<SaleKeys>,
    settings: WorkerSettings,
    /// When idle entries are next looked for.
    next: Instant,
}

impl Recovery {
    /// Due at once: a reader that starts looks for what a dead process left.
    pub fn new(keys: Arc<SaleKeys>, settings: WorkerSettings) -> Self {
        Self { keys, settings, next: Instant::now() }
    }

    /// Claims entries idle past `claim_idle_ms`, every half that time (between 50 ms
    /// and 5 s); nothing when not due or none is idle.
    pub async fn claim_if_due(&mut self, redis: &mut RedisConn) -> Result<Claimed, BackendError> {
        if Instant::now() < self.next {
            return Ok(Claimed::default());
        }
        let claimed = self.claim(redis).await?;
        let every = Duration::from_millis((self.settings.claim_idle_ms / 2).clamp(50, 5_000));
        self.next = Instant::now() + every;
        Ok(claimed)
    }

    async fn claim(&self, redis: &mut RedisConn) -> Result<Claimed, BackendError> {
        let s = &self.settings;
        let pending: StreamPendingCountReply = redis::cmd("XPENDING")
            .arg(&self.keys.orders)
            .arg(GROUP)
            .arg("IDLE")
            .arg(s.claim_idle_ms)
            .arg("-")
            .arg("+")
            .arg(s.batch_size)
            .query_async(redis)
            .await?;
        if pending.ids.is_empty() {
            return Ok(Claimed::default());
        }
        let worn: HashSet<String> =
            pending.ids.iter().filter(|p| p.times_delivered as u64 >= s.max_deliveries).map(|p| p.id.clone()).collect();
        let ids: Vec<String> = pending.ids.into_iter().map(|p| p.id).collect();
        let claimed: redis::Value = redis.xclaim(&self.keys.orders, GROUP, &s.consumer, s.claim_idle_ms, &ids).await?;
        let claimed = Entry::from_claim(claimed)?;
        tracing::info!(stream = %self.keys.orders, claimed = claimed.len(), "took over idle orders");
        let (worn, fresh) = claimed.into_iter().partition(|e| worn.contains(&e.id));
        Ok(Claimed { fresh, worn })
    }
}
