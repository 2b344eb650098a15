//! A worker's name in the consumer groups (`SECKILL_WORKER_NAME`) belongs to one
//! running process at a time. Two processes under one name would each read the
//! other's pending list as its own, and one leaving a group would delete the other's
//! consumer, and with it the orders that consumer held. So a process holds its name
//! as a lease in Redis (`lua/lease.lua`), renewed every second and lapsing
//! [`LEASE`] after its holder stops renewing:
//! - a process started under a name in use waits for the lease to lapse (its holder
//!   may have been killed a moment ago), then refuses to start;
//! - a holder that finds the name taken by another (it was stopped, SIGSTOP or a
//!   long pause, for longer than the lease, and another process started under the
//!   name meanwhile) stops its worker at once without leaving the groups: the name
//!   and what it holds are the other's now;
//! - a holder stopping gracefully lets the name go once its worker has ended, so a
//!   restart under it starts at once.

use crate::{
    backend::{layout::worker_name_lease, outage::Outage, Backend, BackendError},
    shutdown::{self, Shutdown},
};
use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};
use tokio::task::JoinHandle;

/// How long a lease lasts without being renewed (the key's expiry).
pub const LEASE: Duration = crate::backend::layout::WORKER_LEASE;
/// How often its holder renews it.
const RENEW_EVERY: Duration = Duration::from_secs(1);
/// How often a process waiting for a name in use asks again.
const ASK_EVERY: Duration = Duration::from_millis(250);

/// This process's hold on its worker's name.
#[derive(Clone)]
pub struct NameLease {
    backend: Backend,
    name: String,
    key: String,
    token: String,
    /// False once another process took the name: the worker must not leave its groups.
    held: Arc<AtomicBool>,
}

impl NameLease {
    /// This process's hold on `name`, not yet taken ([`take`](Self::take)). One token
    /// for every try: a take whose answer was lost (Redis full, failing over, a link
    /// resetting connections) is recognised as this process's own when asked again.
    pub fn new(backend: &Backend, name: &str) -> Self {
        let key = worker_name_lease(&backend.namespace, name);
        let token = hex::encode(rand::random::<[u8; 16]>());
        let held = Arc::new(AtomicBool::new(true));
        Self { backend: backend.clone(), name: name.to_owned(), key, token, held }
    }

    /// Takes the name, waiting up to a lease's length (and a renewal) for a holder that
    /// stopped renewing; false when another process still holds it then. A Redis error
    /// ends the try: the start-up waits and asks again, as for any step
    /// (`server::when_ready`), with the same token.
    pub async fn take(&self) -> Result<bool, BackendError> {
        let give_up = tokio::time::Instant::now() + LEASE + RENEW_EVERY;
        loop {
            if self.renew(LEASE).await? {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= give_up {
                return Ok(false);
            }
            tokio::time::sleep(ASK_EVERY).await;
        }
    }

    /// True while this process holds the name (shared with the worker's readers).
    pub fn held(&self) -> Arc<AtomicBool> {
        self.held.clone()
    }

    /// Keeps the name while the worker `start` starts runs: renews it until `stop`
    /// fires or another process has the name, then stops the worker (the signal it is
    /// handed) and, when the name is still this process's, lets it go once the worker
    /// has ended.
    pub fn keep(self, stop: Shutdown, start: impl FnOnce(Shutdown) -> JoinHandle<()>) -> JoinHandle<()> {
        let (stop_worker, worker_stops) = shutdown::channel();
        let worker = start(worker_stops);
        tokio::spawn(async move {
            let mut renewals = shutdown::interval(RENEW_EVERY);
            let mut outage = Outage::default();
            let what = format!("renewing the worker's name {}", self.name);
            while stop.tick(&mut renewals).await {
                let renewed = self.renew(LEASE).await;
                outage.note(&what, &renewed);
                match renewed {
                    Ok(true) => {}
                    Ok(false) => {
                        self.held.store(false, Ordering::SeqCst);
                        tracing::error!(name = %self.name, "another process runs a worker under this name: stopping ours");
                        break;
                    }
                    // Redis away: the lease may lapse meanwhile; renewing takes it again.
                    Err(_) => {}
                }
            }
            stop_worker.fire();
            let _ = worker.await;
            if self.held.load(Ordering::SeqCst) {
                if let Err(e) = self.renew(Duration::ZERO).await {
                    tracing::warn!(name = %self.name, "letting the worker's name go: {e} (it lapses by itself)");
                }
            }
        })
    }

    /// Takes or renews the lease for `lasting` (zero: lets it go); false when another
    /// process holds it.
    async fn renew(&self, lasting: Duration) -> Result<bool, BackendError> {
        let mut redis = self.backend.redis.clone();
        let mut call = self.backend.scripts.lease.key(&self.key);
        call.arg(&self.token).arg(lasting.as_millis() as u64);
        let ours: i64 = call.invoke_async(&mut redis).await?;
        Ok(ours == 1)
    }
}
