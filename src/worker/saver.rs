//! Saving what a reader read: persisting entries (in one transaction when it can),
//! recording each fate in Redis, and giving up on entries the database keeps
//! refusing while it answers (dead letters).

use super::WorkerSettings;
use crate::orders::entry::Entry;
use crate::{
    backend::{
        layout::{SaleKeys, GROUP},
        Backend, BackendError, RedisConn,
    },
    orders::FailReason,
    orders::{
        entry::OrderMsg,
        fail::Failure,
        settle::settle,
        store::{self, Fate},
        unsettled::Watch,
    },
};
use std::{collections::HashMap, sync::Arc};

/// Saves one voucher's entries.
pub struct Saver {
    backend: Backend,
    /// The worker's connection (shared by its readers).
    redis: RedisConn,
    keys: Arc<SaleKeys>,
    settings: WorkerSettings,
    voucher_id: i64,
    /// When the sale's keys expire (Unix ms): keys made here get it too. The reader
    /// sets it from the voucher it last read.
    pub expires: i64,
    /// Times the database refused an entry on its own, by entry id.
    strikes: HashMap<String, u64>,
    /// Orders the database committed whose settling in Redis failed, by entry id:
    /// settled before anything else is done ([`Saver::settle_kept`]). Redelivery would
    /// settle them too, but not when Redis lost the sale between the read and the
    /// commit: the rebuilt stream's pending list lacks their entries, nobody delivers
    /// them again, and Redis would count their units unsold and their shoppers' slots
    /// free for good. Settling is idempotent, so settling one twice costs nothing. At
    /// most a batch: nothing new is read while these wait.
    unsettled: Vec<(String, OrderMsg)>,
    /// What this saver has seen of the voucher's rebuilds: batches it may have read
    /// from a stream Redis lost since go on record until they are settled, for the
    /// sweeper should this worker die first (`orders::unsettled`).
    watch: Watch,
}

impl Saver {
    /// A saver of the stream whose bucket's keys are `keys`.
    pub fn new(
        backend: Backend,
        redis: RedisConn,
        settings: WorkerSettings,
        (voucher_id, keys): (i64, Arc<SaleKeys>),
        expires: i64,
    ) -> Self {
        Self {
            backend,
            redis,
            keys,
            settings,
            voucher_id,
            expires,
            strikes: HashMap::new(),
            unsettled: Vec::new(),
            watch: Watch::default(),
        }
    }

    /// Called before each step's reads of the stream: what they bring is compared with
    /// the rebuilds seen so far (`orders::unsettled`).
    pub fn reads_begin(&mut self) {
        self.watch.reads_begin();
    }

    /// Persists entries, in one transaction if it can, else one by one; first settles
    /// what an earlier step committed and could not settle.
    pub async fn handle(&mut self, entries: Vec<Entry>) -> Result<(), BackendError> {
        self.settle_kept().await?;
        let voucher_id = self.voucher_id;
        let (good, bad): (Vec<Entry>, Vec<Entry>) =
            entries.into_iter().partition(|e| e.msg.as_ref().is_some_and(|m| m.voucher_id == voucher_id));
        for e in &bad {
            self.reject(e).await?;
        }
        if good.is_empty() {
            return Ok(());
        }
        let msgs: Vec<OrderMsg> = good.iter().filter_map(|e| e.msg.clone()).collect();
        metrics::counter!("seckill_worker_batches_total").increment(1);
        metrics::histogram!("seckill_worker_batch_orders").record(msgs.len() as f64);
        match store::persist_watched(&self.backend.db, &msgs, self.settings.pay_timeout_ms, Some(&mut self.watch)).await
        {
            Ok(fates) => self.finish(&good, &fates).await,
            // The database cannot write (down, locked, full): no order alone would do
            // better, and the batch waits. The worker's outage says so once, then every
            // 30 s (`backend::outage`); before, every try of every sale's batch logged
            // a line here and then tried each order alone (a drill, 2026-11-30).
            Err(e) if !store::refuses_data(&e) => Err(e.into()),
            Err(e) if good.len() == 1 => self.refused(&good[0], e).await,
            Err(e) => {
                tracing::warn!(
                    stream = %self.keys.orders,
                    "worker: batch of {} refused ({e}); trying each order alone",
                    good.len()
                );
                for e in &good {
                    let msg = e.msg.clone().into_iter().collect::<Vec<_>>();
                    match store::persist_watched(
                        &self.backend.db,
                        &msg,
                        self.settings.pay_timeout_ms,
                        Some(&mut self.watch),
                    )
                    .await
                    {
                        Ok(fates) => self.finish(std::slice::from_ref(e), &fates).await?,
                        Err(err) => self.refused(e, err).await?,
                    }
                }
                Ok(())
            }
        }
    }

    /// One more try for an entry delivered too often. If the database refuses its data
    /// it is dead-lettered; if the database cannot write at all (down, locked, full),
    /// it waits: an outage delays orders, it never fails them, however many times
    /// the entry was delivered meanwhile. One malformed or of another voucher goes
    /// where [`Self::handle`] sends it (a review, 2026-12-02: one of another voucher
    /// was saved here, taking that voucher's stock).
    pub async fn last_try(&mut self, e: Entry) -> Result<(), BackendError> {
        let msg = match &e.msg {
            Some(msg) if msg.voucher_id == self.voucher_id => msg.clone(),
            _ => return self.handle(vec![e]).await,
        };
        match store::persist_watched(&self.backend.db, &[msg], self.settings.pay_timeout_ms, Some(&mut self.watch))
            .await
        {
            Ok(fates) => self.finish(std::slice::from_ref(&e), &fates).await,
            Err(err) if store::refuses_data(&err) => {
                tracing::warn!(entry = %e.id, "order keeps failing: {err}");
                self.dead_letter(&e).await
            }
            Err(err) => Err(err.into()),
        }
    }

    /// An entry the gate did not write for this voucher (malformed, or naming another
    /// voucher) is never persisted here: it goes to the dead-letter stream for the
    /// operator, in the same step as its acknowledgement. It held no unit of this
    /// voucher, so nothing is given back.
    async fn reject(&mut self, e: &Entry) -> Result<(), BackendError> {
        let why = if e.msg.is_some() { "foreign voucher" } else { "malformed" };
        tracing::error!(entry = %e.id, stream = %self.keys.orders, "{why} order entry, dead-lettered");
        let () = redis::pipe()
            .atomic()
            .xadd(&self.keys.dlq, "*", &[("entry", e.id.as_str()), ("reason", why), ("raw", e.raw().as_str())])
            .ignore()
            .pexpire_at(&self.keys.dlq, self.expires)
            .ignore()
            .xack(&self.keys.orders, GROUP, &[&e.id])
            .ignore()
            .query_async(&mut self.redis)
            .await?;
        Ok(())
    }

    /// The database refused one entry on its own. A refusal of the data itself (a
    /// constraint) counts a strike; anything else means the database is unwell, and
    /// the entry waits.
    async fn refused(&mut self, e: &Entry, err: sqlx::Error) -> Result<(), BackendError> {
        if !store::refuses_data(&err) {
            return Err(err.into());
        }
        let strikes = self.strikes.entry(e.id.clone()).or_default();
        *strikes += 1;
        tracing::warn!(entry = %e.id, strikes = *strikes, "database refused order: {err}");
        if *strikes >= self.settings.max_deliveries {
            self.strikes.remove(&e.id);
            self.dead_letter(e).await?;
        }
        Ok(())
    }

    /// Gives up on an entry: unless the database has the order after all, it is buried
    /// there (so no late delivery can store it), then it goes to the dead-letter stream
    /// and its stock and buyer slot are given back, once.
    async fn dead_letter(&mut self, e: &Entry) -> Result<(), BackendError> {
        let Some(m) = &e.msg else { return Ok(()) };
        let fate = store::bury(&self.backend.db, m, FailReason::DeadLetter.as_str()).await?;
        if fate == Fate::Buried {
            tracing::error!(order = m.order_id, entry = %e.id, "order dead-lettered");
        }
        self.finish(std::slice::from_ref(e), &[fate]).await
    }

    /// Records the fates in Redis: persisted orders settled in one step, the others
    /// ended with their give-backs (each acknowledges too, so an order is given back
    /// once whoever gets there first). Persisted orders are copied into `unsettled`
    /// only when this fails (the worker's hot path: a batch settles as it is read).
    async fn finish(&mut self, entries: &[Entry], fates: &[Fate]) -> Result<(), BackendError> {
        self.settle_kept().await?;
        let mut persisted = Vec::with_capacity(entries.len());
        for (e, &fate) in entries.iter().zip(fates) {
            let Some(m) = &e.msg else { continue };
            if fate == Fate::Persisted {
                self.strikes.remove(&e.id);
                persisted.push((e.id.as_str(), m));
            }
        }
        if let Err(e) = self.end_and_settle(entries, fates, &persisted).await {
            self.unsettled.extend(persisted.iter().map(|&(id, m)| (id.to_owned(), m.clone())));
            return Err(e);
        }
        metrics::counter!("seckill_orders_persisted_total").increment(persisted.len() as u64);
        self.watch.settled(&self.backend.db).await;
        Ok(())
    }

    /// Ends the entries that were not persisted (their give-backs), then settles the
    /// persisted ones.
    async fn end_and_settle(
        &mut self,
        entries: &[Entry],
        fates: &[Fate],
        persisted: &[(&str, &OrderMsg)],
    ) -> Result<(), BackendError> {
        for (e, &fate) in entries.iter().zip(fates) {
            let Some(m) = &e.msg else { continue };
            // Recorded by persisting, which decided it (`orders::store`).
            if let Some(failure) = Failure::of(m, &e.id, fate) {
                failure.run(&self.backend, &mut self.redis, &self.keys).await?;
            }
        }
        settle(&self.backend, &mut self.redis, (self.voucher_id, &self.keys), self.expires, persisted).await?;
        Ok(())
    }

    /// Settles the orders committed and not yet settled, in one step.
    pub async fn settle_kept(&mut self) -> Result<(), BackendError> {
        if self.unsettled.is_empty() {
            return Ok(());
        }
        let orders: Vec<(&str, &OrderMsg)> = self.unsettled.iter().map(|(id, m)| (id.as_str(), m)).collect();
        settle(&self.backend, &mut self.redis, (self.voucher_id, &self.keys), self.expires, &orders).await?;
        metrics::counter!("seckill_orders_persisted_total").increment(orders.len() as u64);
        self.unsettled.clear();
        self.watch.settled(&self.backend.db).await;
        Ok(())
    }
}
