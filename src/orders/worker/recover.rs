//! A reader's recovery duties: taking over entries other consumers left idle, a last
//! try for entries delivered too often, and dead-lettering what the database keeps
//! refusing while it answers.

use super::{entry::Entry, reader::Reader};
use crate::{
    backend::{layout::GROUP, BackendError},
    orders::store::{self, Burial, Outcome},
    sale::results::FailReason,
};
use redis::{streams::StreamPendingCountReply, AsyncCommands};
use std::{collections::HashSet, time::Duration};
use tokio::time::Instant;

impl Reader {
    /// Looks for idle entries every half claim-idle time (between 50 ms and 5 s).
    pub(super) async fn recover_if_due(&mut self) -> Result<(), BackendError> {
        if Instant::now() < self.next_recover {
            return Ok(());
        }
        self.recover().await?;
        let every = Duration::from_millis((self.settings.claim_idle_ms / 2).clamp(50, 5_000));
        self.next_recover = Instant::now() + every;
        Ok(())
    }

    /// Takes over entries left idle too long (their consumer died, or this one failed
    /// on them). Those delivered `max_deliveries` times get one last try on their own.
    async fn recover(&mut self) -> Result<(), BackendError> {
        let pending: StreamPendingCountReply = redis::cmd("XPENDING")
            .arg(&self.keys.orders)
            .arg(GROUP)
            .arg("IDLE")
            .arg(self.settings.claim_idle_ms)
            .arg("-")
            .arg("+")
            .arg(self.settings.batch_size)
            .query_async(&mut self.redis)
            .await?;
        if pending.ids.is_empty() {
            return Ok(());
        }
        let worn: HashSet<String> = pending
            .ids
            .iter()
            .filter(|p| p.times_delivered as u64 >= self.settings.max_deliveries)
            .map(|p| p.id.clone())
            .collect();
        let ids: Vec<String> = pending.ids.into_iter().map(|p| p.id).collect();
        let claimed: redis::Value = self
            .redis
            .xclaim(&self.keys.orders, GROUP, &self.settings.consumer, self.settings.claim_idle_ms, &ids)
            .await?;
        let claimed = Entry::from_claim(claimed)?;
        tracing::info!(stream = %self.keys.orders, claimed = claimed.len(), "took over idle orders");
        let (last_tries, fresh): (Vec<Entry>, Vec<Entry>) = claimed.into_iter().partition(|e| worn.contains(&e.id));
        self.handle(fresh).await?;
        for e in last_tries {
            self.last_try(e).await?;
        }
        Ok(())
    }

    /// One more try for an entry delivered too often. If the database refuses its data
    /// it is dead-lettered; if the database cannot write at all (down, locked, full),
    /// it waits: an outage delays orders, it never fails them, however many times
    /// the entry was delivered meanwhile.
    async fn last_try(&mut self, e: Entry) -> Result<(), BackendError> {
        let Some(msg) = e.msg.clone() else { return self.handle(vec![e]).await };
        match store::persist(&self.backend.db, &[msg], self.settings.pay_timeout_ms).await {
            Ok(outcomes) => self.finish(std::slice::from_ref(&e), &outcomes).await,
            Err(err) if store::refuses_data(&err) => {
                tracing::warn!(entry = %e.id, "order keeps failing: {err}");
                self.dead_letter(&e).await
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Gives up on an entry: unless the database has the order after all, it is buried
    /// there (so no late delivery can store it), then it goes to the dead-letter stream
    /// and its stock and buyer slot are given back, once.
    pub(super) async fn dead_letter(&mut self, e: &Entry) -> Result<(), BackendError> {
        let Some(m) = &e.msg else { return Ok(()) };
        let outcome = match store::bury(&self.backend.db, m, FailReason::DeadLetter.as_str()).await? {
            Burial::Persisted => Outcome::Persisted,
            Burial::Buried => {
                tracing::error!(order = m.order_id, entry = %e.id, "order dead-lettered");
                Outcome::Buried
            }
        };
        self.finish(std::slice::from_ref(e), &[outcome]).await
    }
}
