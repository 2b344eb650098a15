//! The full topology's Redis: a Redis Cluster of three masters, each with a replica,
//! on loopback, each node a `redis-server` this run started (so a master can be
//! killed, and started again to rejoin as a replica). No persistence: the replicas
//! are what keeps a grant through a master's death (`SECKILL_WAIT_REPLICAS=1`).
//!
//! Every node is reached through proxies (`proxy.rs`): it announces a proxy's port as
//! its own, for clients and replication, and another's for the cluster bus, and it
//! makes its own connections from an address of its own (`bind-source-addr`). So the
//! nemesis can cut a master off from its replica, or from every other node while the
//! apps still reach it: the partitions Redis Cluster loses writes in. The chaos tool's
//! own checks use the nodes' ports themselves.

use crate::proxy::{node_source, Proxy};
use seckill::server::local_redis::steady_port;
use std::{path::PathBuf, process::Stdio, sync::Arc, time::Duration};
use tokio::{
    process::{Child, Command},
    sync::Mutex,
};

pub struct Cluster {
    dir: PathBuf,
    pub ports: Vec<u16>,
    nodes: Vec<Mutex<Option<Child>>>,
    /// Each node's client port, as the cluster announces it.
    clients: Vec<Arc<Proxy>>,
    /// Each node's cluster bus port, as the cluster announces it.
    buses: Vec<Arc<Proxy>>,
}

impl Cluster {
    /// Starts six nodes and makes them a cluster (`redis-cli --cluster create`).
    pub async fn start(dir: PathBuf) -> Result<Self, String> {
        let ports = (0..6).map(|_| steady_port(true)).collect::<Result<Vec<_>, _>>()?;
        let (mut clients, mut buses) = (Vec::new(), Vec::new());
        for &port in &ports {
            clients.push(Proxy::start(([127, 0, 0, 1], port).into()).await?);
            buses.push(Proxy::start(([127, 0, 0, 1], port + 10_000).into()).await?);
        }
        let me = Self { dir, nodes: ports.iter().map(|_| Mutex::new(None)).collect(), ports, clients, buses };
        for i in 0..me.ports.len() {
            me.start_node(i).await?;
        }
        let nodes: Vec<String> = me.ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let created = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&nodes)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .await
            .map_err(|e| format!("redis-cli --cluster create: {e}"))?;
        if !created.status.success() {
            return Err(format!("redis-cli --cluster create: {}", String::from_utf8_lossy(&created.stderr)));
        }
        me.wait_healthy(Duration::from_secs(30)).await?;
        Ok(me)
    }

    /// `REDIS_URL` for the app: every node, through its proxy.
    pub fn url(&self) -> String {
        self.clients.iter().map(|p| format!("redis://127.0.0.1:{}/", p.port)).collect::<Vec<_>>().join(",")
    }

    /// Starts node `i` (again: its `nodes.conf` makes it rejoin the cluster).
    pub async fn start_node(&self, i: usize) -> Result<(), String> {
        let port = self.ports[i];
        let dir = self.dir.join(format!("redis-{port}"));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.join("redis.log")).map_err(|e| e.to_string())?;
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--appendonly", "no"])
            .args(["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"])
            .args(["--bind-source-addr", &node_source(i).to_string(), "--cluster-announce-ip", "127.0.0.1"])
            .args(["--cluster-announce-port", &self.clients[i].port.to_string()])
            .args(["--cluster-announce-bus-port", &self.buses[i].port.to_string()])
            .arg("--dir")
            .arg(&dir)
            .stdout(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting redis-server: {e}"))?;
        *self.nodes[i].lock().await = Some(child);
        for _ in 0..100 {
            if query::<String>(port, &mut redis::cmd("PING")).await.is_some() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("Redis node {port} did not answer"))
    }

    /// The replica of master `m`, by index: the node whose master is `m`'s announced
    /// port.
    pub async fn replica_of(&self, m: usize) -> Option<usize> {
        for (i, &port) in self.ports.iter().enumerate().filter(|(i, _)| *i != m) {
            let role: Option<Vec<redis::Value>> = query(port, &mut redis::cmd("ROLE")).await;
            if let Some([redis::Value::BulkString(r), _, redis::Value::Int(master), ..]) = role.as_deref() {
                if r == b"slave" && *master == i64::from(self.clients[m].port) {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Node `i`'s client port as the cluster announces it: the apps' link to it.
    pub fn client_link(&self, i: usize) -> Arc<Proxy> {
        self.clients[i].clone()
    }

    /// Cuts (or heals) every link between nodes `a` and `b`, both ways: client and
    /// replication links, and the cluster bus.
    pub fn cut_between(&self, a: usize, b: usize, cut: bool) {
        for (to, from) in [(a, b), (b, a)] {
            self.clients[to].cut_from(node_source(from), cut);
            self.buses[to].cut_from(node_source(from), cut);
        }
    }

    /// Kills node `i` (SIGKILL).
    pub async fn kill(&self, i: usize) {
        if let Some(mut child) = self.nodes[i].lock().await.take() {
            let _ = child.kill().await;
        }
    }

    /// Which of `masters` (by index) holds `key`'s slot: the one that answers for it
    /// (the others answer `MOVED`).
    pub async fn master_of(&self, key: &str, masters: &[usize]) -> Option<usize> {
        for &m in masters {
            if query::<i64>(self.ports[m], redis::cmd("EXISTS").arg(key)).await.is_some() {
                return Some(m);
            }
        }
        None
    }

    /// The nodes that are masters now, by index.
    pub async fn masters(&self) -> Vec<usize> {
        let mut masters = Vec::new();
        for (i, &port) in self.ports.iter().enumerate() {
            let role: Option<Vec<redis::Value>> = query(port, &mut redis::cmd("ROLE")).await;
            if matches!(role.as_deref(), Some([redis::Value::BulkString(r), ..]) if r == b"master") {
                masters.push(i);
            }
        }
        masters
    }

    /// Waits until every node answers, says the cluster is ok, and each of the three
    /// masters has a replica in sync (so the next master killed can be replaced).
    pub async fn wait_healthy(&self, limit: Duration) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if self.healthy().await {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("the Redis Cluster was not whole again within {limit:?}"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn healthy(&self) -> bool {
        let mut synced_replicas = 0;
        for &port in &self.ports {
            let Some(info) = query::<String>(port, redis::cmd("CLUSTER").arg("INFO")).await else { return false };
            if !info.contains("cluster_state:ok") {
                return false;
            }
            let Some(repl) = query::<String>(port, redis::cmd("INFO").arg("replication")).await else { return false };
            if repl.contains("role:slave") && repl.contains("master_link_status:up") {
                synced_replicas += 1;
            }
        }
        synced_replicas == 3
    }

    /// Cuts every pub/sub connection on every node.
    pub async fn cut_pubsub(&self) {
        for &port in &self.ports {
            let _: Option<i64> = query(port, redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub")).await;
        }
    }

    pub async fn stop(&self) {
        self.clients.iter().chain(&self.buses).for_each(|p| p.stop());
        for node in &self.nodes {
            if let Some(mut child) = node.lock().await.take() {
                let _ = child.kill().await;
            }
        }
    }
}

/// One command to one node, within a second; `None` when it does not answer.
async fn query<T: redis::FromRedisValue>(port: u16, cmd: &mut redis::Cmd) -> Option<T> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
    let ask = async {
        let mut c = client.get_multiplexed_async_connection().await.ok()?;
        cmd.query_async(&mut c).await.ok()
    };
    tokio::time::timeout(Duration::from_secs(1), ask).await.ok().flatten()
}
