//! Redis, one node or a cluster, behind one handle.
//!
//! `REDIS_URL` holding one URL is a single Redis; several, comma-separated, are seed
//! nodes of a Redis Cluster. Either way the rest of the app holds a [`RedisConn`]:
//! a multiplexed, self-healing connection that every command, script and pipeline goes
//! through. On a cluster it keeps one connection per node (never per voucher), routes
//! each command to the node holding its slot, follows MOVED and ASK, and re-reads the
//! slot map after a failover. Every key of one voucher shares a hash tag, so a script
//! call or an atomic pipeline never spans two slots (CROSSSLOT cannot happen).
//!
//! Sale events use classic pub/sub (`PUBLISH` from the scripts, `SUBSCRIBE` on any one
//! node): a cluster forwards a classic message to every node, so one subscription per
//! process hears every voucher, whichever node its keys live on, and the scripts need
//! not declare the channel as a key. Sharded pub/sub would keep messages on the
//! voucher's shard, which pays only at many thousands of messages a second; ours are a
//! few per sale (sold out, restocked, workers joining), and it would cost a
//! subscription per voucher, renewed at every resharding.

use redis::{
    aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig, PubSub},
    cluster::ClusterClientBuilder,
    cluster_async::ClusterConnection,
    Cmd, FromRedisValue, Pipeline, RedisFuture, RedisResult, Value,
};
use std::{
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc, PoisonError, RwLock,
    },
    time::{Duration, Instant},
};

/// How long connecting to a node, and any one reply, may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Attempts at the first connection, a second apart, before the app gives up starting.
const FIRST_TRIES: usize = 5;

/// Where Redis is, from `REDIS_URL`.
pub enum RedisTarget {
    Single(redis::Client),
    Cluster {
        client: redis::cluster::ClusterClient,
        /// Each seed node on its own, for the pub/sub subscription.
        nodes: Vec<redis::Client>,
        /// The node the last subscription went to (the next one tries the one after).
        next: AtomicUsize,
    },
}

impl RedisTarget {
    /// Parses `REDIS_URL`: one URL, or several comma-separated cluster nodes.
    pub fn open(urls: &str) -> RedisResult<Self> {
        let urls: Vec<&str> = urls.split(',').map(str::trim).filter(|u| !u.is_empty()).collect();
        if urls.len() <= 1 {
            return Ok(Self::Single(redis::Client::open(urls.first().copied().unwrap_or_default())?));
        }
        let nodes = urls.iter().map(|u| redis::Client::open(*u)).collect::<RedisResult<Vec<_>>>()?;
        // A failover takes a node timeout or two. A command retries for up to about a
        // second (jittered 10 ms doubling to 400 ms), then fails: a grab answers
        // `unavailable` and the worker retries with its own backoff, instead of waiting
        // out the crate's default of 16 retries of up to ten minutes.
        let client = ClusterClientBuilder::new(urls)
            .connection_timeout(TIMEOUT)
            .response_timeout(TIMEOUT)
            .retries(7)
            .retry_wait_formula(10, 2)
            .min_retry_wait(10)
            .max_retry_wait(400)
            .build()?;
        Ok(Self::Cluster { client, nodes, next: AtomicUsize::new(0) })
    }

    /// A connection: multiplexed, reconnecting, and never waiting on Redis longer than
    /// `TIMEOUT` (5 s) for a reply. The server opens one per serving runtime (its
    /// replies are read on that runtime's thread) and one for the worker.
    ///
    /// On one Redis, a lost connection is made again by one attempt that every command
    /// waiting meanwhile shares, made at once and never retried after a pause: if it
    /// fails (Redis still down), those commands fail and the next command makes the
    /// next attempt. So a command waits for Redis no longer than Redis is away. The
    /// crate retries after pauses of a second or more (its default grows them to a
    /// minute), and a grab that came during a pause waited it out, past its deadline,
    /// though Redis was back. A command that finds its connection dead is sent once
    /// more on the new one ([`connection_died`]). The first connection is tried
    /// [`FIRST_TRIES`] times.
    pub async fn connect(&self) -> RedisResult<RedisConn> {
        match self {
            Self::Single(client) => {
                let cfg = ConnectionManagerConfig::new()
                    .set_connection_timeout(TIMEOUT)
                    .set_response_timeout(TIMEOUT)
                    .set_number_of_retries(0);
                let mut tries = 1;
                loop {
                    match ConnectionManager::new_with_config(client.clone(), cfg.clone()).await {
                        Ok(c) => return Ok(RedisConn::Single(c)),
                        Err(e) if tries >= FIRST_TRIES || !e.is_io_error() => return Err(e),
                        Err(_) => tries += 1,
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            Self::Cluster { client, .. } => Ok(RedisConn::Cluster(Cluster::connect(client.clone()).await?)),
        }
    }

    /// The nodes (of those `REDIS_URL` names) that may evict keys under memory
    /// pressure, each with its policy: a `maxmemory` limit and a `maxmemory-policy`
    /// other than `noeviction`. Every key of a sale has an expiry (its end plus the
    /// drain grace), so a `volatile-*` policy (the default of the large managed
    /// services) as much as an `allkeys-*` one could take one key of a sale and leave
    /// the rest: an order stream gone with its queued orders, a `restocked` set gone
    /// so a cancelled unit comes back twice. A node whose settings cannot be read (a
    /// managed service may forbid `CONFIG`) is only logged: its operator must see to it.
    pub async fn evicting_nodes(&self) -> Vec<String> {
        let mut evicting = Vec::new();
        for client in self.nodes() {
            let node = client.get_connection_info().addr.to_string();
            match tokio::time::timeout(TIMEOUT, eviction_policy(client)).await {
                Ok(Ok(None)) => {}
                Ok(Ok(Some(policy))) => evicting.push(format!("{node}: maxmemory-policy {policy}")),
                Ok(Err(e)) => {
                    tracing::warn!("{node}: its maxmemory-policy cannot be read ({e}); it must be noeviction")
                }
                Err(_) => tracing::warn!("{node}: did not say its maxmemory-policy within {TIMEOUT:?}"),
            }
        }
        evicting
    }

    /// Whether Redis answers at all (`PING`): the one Redis, or any seed node of a
    /// cluster. A node loading its file answers `LOADING`, which is not an answer.
    pub async fn answers(&self) -> bool {
        for client in self.nodes() {
            let ping = async {
                let mut connection = client.get_multiplexed_async_connection().await?;
                redis::cmd("PING").query_async::<String>(&mut connection).await
            };
            if matches!(tokio::time::timeout(TIMEOUT, ping).await, Ok(Ok(_))) {
                return true;
            }
        }
        false
    }

    /// The one Redis, or the cluster's seed nodes, each on its own.
    fn nodes(&self) -> &[redis::Client] {
        match self {
            Self::Single(client) => std::slice::from_ref(client),
            Self::Cluster { nodes, .. } => nodes.as_slice(),
        }
    }

    /// A pub/sub connection: to the one Redis, or to a cluster node, taking the seed
    /// nodes in turn so a resubscription after a node died goes to a live one.
    pub async fn pubsub(&self) -> RedisResult<PubSub> {
        match self {
            Self::Single(client) => client.get_async_pubsub().await,
            Self::Cluster { nodes, next, .. } => {
                let mut last = None;
                for _ in 0..nodes.len() {
                    let i = next.fetch_add(1, Ordering::Relaxed) % nodes.len();
                    match tokio::time::timeout(TIMEOUT, nodes[i].get_async_pubsub()).await {
                        Ok(Ok(p)) => return Ok(p),
                        Ok(Err(e)) => last = Some(e),
                        Err(_) => last = Some(std::io::Error::from(std::io::ErrorKind::TimedOut).into()),
                    }
                }
                Err(last.expect("a cluster has seed nodes"))
            }
        }
    }
}

/// The node's eviction policy when it may evict keys (`maxmemory` set, a policy
/// other than `noeviction`); `None` when it never does.
async fn eviction_policy(client: &redis::Client) -> RedisResult<Option<String>> {
    let mut c = client.get_multiplexed_async_connection().await?;
    let (_, policy): (String, String) =
        redis::cmd("CONFIG").arg("GET").arg("maxmemory-policy").query_async(&mut c).await?;
    let (_, limit): (String, u64) = redis::cmd("CONFIG").arg("GET").arg("maxmemory").query_async(&mut c).await?;
    Ok((limit > 0 && policy != "noeviction").then_some(policy))
}

/// A connection to Redis, shared by everything on one serving runtime (the server
/// opens one per runtime, and one for the worker). Cheap to clone: clones share the
/// connections underneath.
#[derive(Clone)]
pub enum RedisConn {
    Single(ConnectionManager),
    Cluster(Arc<Cluster>),
}

/// How long every command on a cluster connection may fail (no answer in time, or no
/// connection) before the connection is made anew, and the least time between two.
const WEDGED: Duration = Duration::from_secs(10);

/// A Redis Cluster connection that is made anew when it wedges. The crate's connection
/// heals itself after a failover, mostly: in a drill (2026-11-30) a master was frozen
/// (SIGSTOP) while grabs were in flight to it, its replica took over, and on two of
/// three app processes the connection never sent a command again. Each one's every
/// command timed out for eight minutes, though the cluster was healthy and a new
/// connection worked, until the processes were restarted. So once every command has
/// failed for [`WEDGED`], a connection is made from the seed nodes (reading the slot
/// map afresh) and takes its place, in a task of its own; the commands under way on
/// the old one fail or finish as they would have.
pub struct Cluster {
    client: redis::cluster::ClusterClient,
    current: RwLock<ClusterConnection>,
    /// When the failures under way began (ms since `clock`), 0 while commands answer.
    failing_since: AtomicU64,
    /// When the connection was last made anew (ms since `clock`).
    renewed_at: AtomicU64,
    clock: Instant,
}

impl Cluster {
    async fn connect(client: redis::cluster::ClusterClient) -> RedisResult<Arc<Self>> {
        let current = RwLock::new(client.get_async_connection().await?);
        let (failing_since, renewed_at) = (AtomicU64::new(0), AtomicU64::new(0));
        Ok(Arc::new(Self { client, current, failing_since, renewed_at, clock: Instant::now() }))
    }

    /// The connection in use (a handle: cheap to clone).
    fn connection(&self) -> ClusterConnection {
        self.current.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn now_ms(&self) -> u64 {
        (self.clock.elapsed().as_millis() as u64).max(1)
    }

    /// Counts a command's outcome: an answer (even a refusal) ends the failures; one
    /// more failure past [`WEDGED`] of them starts a connection made anew.
    fn answered<T>(self: &Arc<Self>, outcome: &RedisResult<T>) {
        let failed = outcome.as_ref().is_err_and(|e| e.is_timeout() || e.is_io_error() || e.is_connection_dropped());
        if !failed {
            if self.failing_since.load(Ordering::Relaxed) != 0 {
                self.failing_since.store(0, Ordering::Relaxed);
            }
            return;
        }
        let now = self.now_ms();
        let since = match self.failing_since.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => now,
            Err(since) => since,
        };
        let wedged = WEDGED.as_millis() as u64;
        let last = self.renewed_at.load(Ordering::Relaxed);
        if now.saturating_sub(since) < wedged || (last != 0 && now.saturating_sub(last) < wedged) {
            return;
        }
        if self.renewed_at.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            tokio::spawn(self.clone().renew());
        }
    }

    async fn renew(self: Arc<Self>) {
        match tokio::time::timeout(TIMEOUT, self.client.get_async_connection()).await {
            Ok(Ok(connection)) => {
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = connection;
                tracing::warn!("Redis Cluster: every command failed for {WEDGED:?}; the connection was made anew");
            }
            Ok(Err(e)) => tracing::warn!("Redis Cluster: every command failed for {WEDGED:?}; a new connection: {e}"),
            Err(_) => {
                tracing::warn!("Redis Cluster: every command failed for {WEDGED:?}; no new connection in {TIMEOUT:?}")
            }
        }
    }
}

impl RedisConn {
    /// Connects to `REDIS_URL` (tests and tools; the server goes through [`RedisTarget`]).
    pub async fn open(urls: &str) -> RedisResult<Self> {
        RedisTarget::open(urls)?.connect().await
    }

    /// Sends every command at once and answers each one's result, in their order. The
    /// keys may live in different Cluster slots (one command each, where a pipeline
    /// must keep to one slot); the multiplexed connections still write them back to
    /// back, so this costs about one round trip per node. Each result stands alone: a
    /// node failing over fails only the commands sent to it.
    pub async fn query_each<T: FromRedisValue>(&self, cmds: impl IntoIterator<Item = Cmd>) -> Vec<RedisResult<T>> {
        let calls = cmds.into_iter().map(|cmd| {
            let mut conn = self.clone();
            async move { cmd.query_async::<T>(&mut conn).await }
        });
        futures::future::join_all(calls).await
    }
}

/// True when a command failed because its connection had died (Redis restarted, or
/// went away and came back): it is sent once more, on the connection made anew. A
/// connection is found dead only by the first command sent on it, and that command
/// cannot tell whether the old Redis ran it before dying; so every command and script
/// the app sends may run twice without harm (`lua/grab.lua` answers a grab sent again
/// with its order id as before; the give-backs, `settle.lua` and `warm.lua` act once
/// per order; a counter may count one refusal twice). A command that timed out is not
/// sent again: Redis is there but slow, and a second try would double the wait.
fn connection_died(e: &redis::RedisError) -> bool {
    e.is_io_error() && !e.is_timeout()
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => Box::pin(async move {
                match c.req_packed_command(cmd).await {
                    Err(e) if connection_died(&e) => c.req_packed_command(cmd).await,
                    answer => answer,
                }
            }),
            Self::Cluster(c) => Box::pin(async move {
                let answer = c.connection().req_packed_command(cmd).await;
                c.answered(&answer);
                answer
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => Box::pin(async move {
                match c.req_packed_commands(cmd, offset, count).await {
                    Err(e) if connection_died(&e) => c.req_packed_commands(cmd, offset, count).await,
                    answer => answer,
                }
            }),
            Self::Cluster(c) => Box::pin(async move {
                let answer = c.connection().req_packed_commands(cmd, offset, count).await;
                c.answered(&answer);
                answer
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.connection().get_db(),
        }
    }
}

/// The Cluster slot of `key`: CRC16 (XMODEM) of its hash tag (the text between the
/// first `{` and the next `}`, when not empty) or else of the whole key, modulo 16384.
pub(crate) fn slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter().position(|&b| b == b'}').filter(|&close| close > 0).map(|close| &rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(key)) % 16384
}

#[cfg(test)]
mod tests {
    use super::slot;

    /// Figures from `CLUSTER KEYSLOT` on a Redis 7.
    #[test]
    fn slots_match_redis() {
        assert_eq!(slot(b"123456789"), 12739);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"seckill:{v42}:orders"), slot(b"v42"));
        assert_ne!(slot(b"a{}b"), slot(b""), "an empty tag hashes the whole key");
        assert_eq!(slot(b"foo{bar"), 15278, "an open brace alone is no tag");
        assert_eq!(slot(b"{}{x}"), 3257);
        assert_ne!(slot(b"{}{x}"), slot(b"x"), "only the first pair of braces counts");
    }
}
