//! Thread per core. The process serves HTTP from several single-threaded runtimes,
//! one per thread (`SECKILL_THREADS`, one per core by default), as actix-web's workers
//! do: the first accepts and hands each connection to a runtime in turn, which serves
//! it to its end and grabs through a Redis connection of its own (`http.rs`). The
//! first runtime, the one `serve` was called on, also runs the background tasks
//! (worker, sweeper, sampler, event listener); the others run on threads started here.
//!
//! Why not one multi-threaded runtime: there a connection's task moved between threads
//! (a Redis reply woke the grab on the thread that read the reply, its allocations
//! were freed on another, the timer wheel was shared): a runtime per thread spends a
//! fifth less CPU per granted grab, and the storm runs faster (figures: `src/bin/bench/history.md`).
//!
//! What a runtime opened lives as long as it does: a socket is driven by the runtime
//! it was opened on, and a pooled PostgreSQL connection may be opened by one runtime and
//! used by another. So the extra runtimes stop serving with the rest, then wait for
//! [`Runtimes::finish`], called once nothing uses the stores any more.

use super::{
    http::{self, Connections, Handed},
    ServeError,
};
use crate::{
    backend::{RedisConn, RedisTarget},
    shutdown::{self, Shutdown, Trigger},
};
use axum::Router;
use std::{sync::Arc, thread::JoinHandle, time::Duration};
use tokio::sync::{mpsc, oneshot};

/// Builds a runtime's router around the Redis connection it opened.
pub type BuildRouter = Arc<dyn Fn(RedisConn) -> Router + Send + Sync>;

/// What every runtime serves with.
pub struct Serving {
    pub target: Arc<RedisTarget>,
    pub build: BuildRouter,
    pub header_timeout: Duration,
    pub grace: Duration,
    /// The stop signal: stop accepting, finish the requests in flight.
    pub stop: Shutdown,
}

/// The extra runtimes, serving.
pub struct Runtimes {
    threads: Vec<JoinHandle<()>>,
    /// Where each takes the connections handed to it.
    pub handoff: Vec<mpsc::UnboundedSender<Handed>>,
    /// Fired by [`Runtimes::finish`]: the runtimes may end.
    release: Trigger,
}

impl Runtimes {
    /// Starts `count` runtimes on threads of their own and waits until each has its
    /// Redis connection (or the first error).
    pub async fn start(count: usize, serving: &Arc<Serving>) -> Result<Self, ServeError> {
        let (release, released) = shutdown::channel();
        let mut runtimes = Self { threads: Vec::with_capacity(count), handoff: Vec::with_capacity(count), release };
        let mut ready = Vec::with_capacity(count);
        for i in 1..=count {
            let (tell, told) = oneshot::channel();
            let (hand, handed) = mpsc::unbounded_channel();
            let (serving, released) = (serving.clone(), released.clone());
            let thread = std::thread::Builder::new()
                .name(format!("seckill-http-{i}"))
                .spawn(move || run(handed, &serving, &released, tell))?;
            runtimes.threads.push(thread);
            runtimes.handoff.push(hand);
            ready.push(told);
        }
        for told in ready {
            // A runtime that ended before telling failed to build: say so.
            told.await.unwrap_or_else(|_| Err(ServeError::Config("a serving thread did not start".into())))?;
        }
        Ok(runtimes)
    }

    /// Lets the runtimes end (they have stopped serving, or stop now) and waits for
    /// their threads.
    pub async fn finish(self) {
        drop(self.handoff);
        self.release.fire();
        let threads = self.threads;
        let joined =
            tokio::task::spawn_blocking(move || threads.into_iter().filter_map(|t| t.join().err()).count()).await;
        if !matches!(joined, Ok(0)) {
            tracing::warn!("a serving thread panicked");
        }
    }
}

/// One extra runtime: connects to Redis, says it is ready, serves until the stop
/// signal, then lives on until released.
fn run(
    handed: mpsc::UnboundedReceiver<Handed>,
    serving: &Serving,
    released: &Shutdown,
    tell: oneshot::Sender<Result<(), ServeError>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = tell.send(Err(e.into()));
            return;
        }
    };
    runtime.block_on(async {
        let redis = match serving.target.connect().await {
            Ok(redis) => redis,
            Err(e) => {
                let _ = tell.send(Err(e.into()));
                return;
            }
        };
        tokio::spawn(crate::sale::batches::mailbox());
        let _ = tell.send(Ok(()));
        let own = Connections::new((serving.build)(redis), serving.header_timeout);
        http::serve_handed(handed, own, serving.grace, serving.stop.wait()).await;
        released.wait().await;
    });
}
