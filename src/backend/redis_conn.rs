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
    Cmd, Pipeline, RedisFuture, RedisResult, Value,
};
use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

/// How long connecting to a node, and any one reply, may take.
const TIMEOUT: Duration = Duration::from_secs(5);

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

    /// Whether this is a cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster { .. })
    }

    /// The shared connection: multiplexed, reconnecting, and never waiting on Redis
    /// longer than [`TIMEOUT`] for a reply.
    pub async fn connect(&self) -> RedisResult<RedisConn> {
        match self {
            Self::Single(client) => {
                let cfg = ConnectionManagerConfig::new().set_connection_timeout(TIMEOUT).set_response_timeout(TIMEOUT);
                Ok(RedisConn::Single(ConnectionManager::new_with_config(client.clone(), cfg).await?))
            }
            Self::Cluster { client, .. } => Ok(RedisConn::Cluster(client.get_async_connection().await?)),
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

/// The connection to Redis that the whole process shares. Cheap to clone: clones
/// share the connections underneath.
#[derive(Clone)]
pub enum RedisConn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl RedisConn {
    /// Connects to `REDIS_URL` (tests and tools; the server goes through [`RedisTarget`]).
    pub async fn open(urls: &str) -> RedisResult<Self> {
        RedisTarget::open(urls)?.connect().await
    }
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(cmd, offset, count),
            Self::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}
