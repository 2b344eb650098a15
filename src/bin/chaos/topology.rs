//! The topologies a run is made on, each part of which can be hit:
//! - **one box**: one Redis with its append-only file (`appendfsync always`, the one-box
//!   default), one SQLite file, two app processes sharing them;
//! - **full**: a Redis Cluster of three masters with a replica each and
//!   `SECKILL_WAIT_REPLICAS=1`, PostgreSQL, three app processes.
//!
//! The app processes are the release build (the binary beside this one). Each reaches
//! one store through a proxy of its own (`proxy.rs`), a link the nemesis can break:
//! Redis on one box, PostgreSQL on the full topology. On the full topology every
//! cluster node is reached through proxies too, shared by all its callers, which the
//! nemesis uses to split the cluster (`cluster.rs`) and to break the apps' links to
//! one master.

use crate::{cluster::Cluster, postgres::Postgres, proxy::Proxy};
use seckill::server::local_redis::{steady_port, LocalRedis};
use seckill::testing::disk::Disk;
use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::Arc,
    time::Duration,
};
use tokio::{
    process::{Child, Command},
    sync::Mutex,
};

/// How long an app may take to answer `/readyz` after it starts (a restart under a
/// worker name whose holder was just killed waits for that name's lease to lapse).
const READY_WITHIN: Duration = Duration::from_secs(60);
/// PostgreSQL's log, beside the app processes' logs once the run ends.
const POSTGRES_LOG: &str = "postgres.log";
use seckill::testing::FAKETIME;

/// The apps' Redis namespace (the server's default).
const NAMESPACE: &str = "seckill";

/// Order ids each app takes from Redis at a time on the full topology (the default
/// is larger): see where it is set.
const ID_BLOCK: &str = "16";

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// SQLite, one Redis with its append-only file, two app processes.
    OneBox,
    /// PostgreSQL, a Redis Cluster with replicas, three app processes.
    Full,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Self::OneBox => "onebox",
            Self::Full => "full",
        }
    }

    /// As `--topology` takes it.
    pub fn flag(self) -> &'static str {
        match self {
            Self::OneBox => "one-box",
            Self::Full => "full",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Self::OneBox => "one box: SQLite, one Redis with AOF, 2 app processes",
            Self::Full => "full: PostgreSQL, a Redis Cluster of 3 masters with a replica each, 3 app processes",
        }
    }

    pub fn processes(self) -> usize {
        match self {
            Self::OneBox => 2,
            Self::Full => 3,
        }
    }
}

/// Settings every app process gets.
pub struct AppSettings {
    pub pay_timeout_ms: u64,
    pub claim_idle_ms: u64,
}

enum RedisPart {
    Single { redis: Mutex<Option<LocalRedis>>, port: u16 },
    Cluster(Cluster),
}

enum DbPart {
    Sqlite,
    Postgres(Postgres),
}

pub struct Topology {
    pub kind: Kind,
    dir: PathBuf,
    pub admin_token: String,
    session_secret: String,
    pub database_url: String,
    pub redis_url: String,
    redis: RedisPart,
    db: DbPart,
    /// The one box's database's own disk ([`DISK_SIZE`]), when it could be mounted: the
    /// nemesis fills it to the last byte, then frees it (`FaultKind::DiskFull`). A full
    /// disk once lost acknowledged orders (2026-11-30, `server::database`). Where it
    /// cannot be mounted (not root) the database is in the run's folder and the fault
    /// is not drawn.
    disk: Option<Disk>,
    pub apps: Vec<Mutex<App>>,
    ports: Vec<u16>,
    /// Each app's link to its proxied store.
    links: Vec<Arc<Proxy>>,
    settings: AppSettings,
}

/// One app process: its port stays when it is started again.
pub struct App {
    pub index: usize,
    pub port: u16,
    pub child: Option<Child>,
}

impl App {
    pub fn name(&self) -> String {
        format!("app-{}", self.index + 1)
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Sends `signal` to the process (SIGSTOP, SIGCONT, SIGTERM).
    pub fn signal(&self, signal: libc::c_int) {
        if let Some(pid) = self.child.as_ref().and_then(Child::id) {
            // SAFETY: kill(2) on a child this run started and has not reaped.
            unsafe { libc::kill(pid as libc::pid_t, signal) };
        }
    }
}

/// The one box's database's disk: its database and log take a few MB in a run.
const DISK_SIZE: &str = "32m";

impl Topology {
    /// Starts the stores and the app processes under `dir`, each app ready before the
    /// next starts (SQLite's migrations take no lock between processes).
    pub async fn start(kind: Kind, dir: &Path, settings: AppSettings) -> Result<Self, String> {
        let (redis, redis_url) = match kind {
            Kind::OneBox => {
                let redis = LocalRedis::start_on(dir, steady_port(false)?).await?;
                let (port, url) = (redis.port, redis.url.clone());
                (RedisPart::Single { redis: Mutex::new(Some(redis)), port }, url)
            }
            Kind::Full => {
                let cluster = Cluster::start(dir.to_owned()).await?;
                let url = cluster.url();
                (RedisPart::Cluster(cluster), url)
            }
        };
        let mut disk = None;
        let (db, database_url, store_port) = match kind {
            Kind::OneBox => {
                let RedisPart::Single { port, .. } = &redis else { unreachable!("one box, one Redis") };
                disk = Disk::mount(&dir.join("db"), DISK_SIZE)
                    .inspect_err(|e| println!("chaos: no database disk faults ({e})"))
                    .ok();
                let at = disk.as_ref().map_or(dir, Disk::path);
                (DbPart::Sqlite, format!("sqlite://{}/chaos.db", at.display()), *port)
            }
            Kind::Full => {
                let pg_port = steady_port(false)?;
                let pg = Postgres::start(pg_port).await?;
                println!(
                    "chaos: PostgreSQL in {} while it runs (its log is copied to {} at the end)",
                    pg.dir().display(),
                    dir.join(POSTGRES_LOG).display()
                );
                let url = pg.url();
                (DbPart::Postgres(pg), url, pg_port)
            }
        };
        let mut links = Vec::new();
        for _ in 0..kind.processes() {
            links.push(Proxy::start(([127, 0, 0, 1], store_port).into()).await?);
        }
        let ports = (0..kind.processes()).map(|_| steady_port(false)).collect::<Result<Vec<_>, _>>()?;
        let apps =
            ports.iter().enumerate().map(|(index, &port)| Mutex::new(App { index, port, child: None })).collect();
        let stamp = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default();
        let me = Self {
            kind,
            dir: dir.to_owned(),
            admin_token: format!("chaos-admin-{stamp}"),
            session_secret: format!("chaos-session-secret-{stamp}-of-more-than-32-bytes"),
            database_url,
            redis_url,
            redis,
            db,
            disk,
            apps,
            ports,
            links,
            settings,
        };
        for app in &me.apps {
            me.start_app(&mut *app.lock().await, 0).await?;
        }
        Ok(me)
    }

    /// Each app's address (its port stays when it is started again).
    pub fn bases(&self) -> Vec<String> {
        self.ports.iter().map(|port| format!("http://127.0.0.1:{port}")).collect()
    }

    /// Starts the app process (again), its clock `offset_s` seconds off (libfaketime),
    /// and waits until it answers `/readyz`.
    pub async fn start_app(&self, app: &mut App, offset_s: i64) -> Result<(), String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let server = exe.with_file_name("seckill");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{}.log", app.name())))
            .map_err(|e| e.to_string())?;
        let s = &self.settings;
        let link = self.links[app.index].port;
        let (database_url, redis_url) = match self.kind {
            Kind::OneBox => (self.database_url.clone(), format!("redis://127.0.0.1:{link}/")),
            Kind::Full => (format!("postgres://postgres@127.0.0.1:{link}/postgres"), self.redis_url.clone()),
        };
        let mut command = Command::new(&server);
        command
            .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{}", app.port))
            .env("DATABASE_URL", database_url)
            .env("REDIS_URL", redis_url)
            .env("SECKILL_ADMIN_TOKEN", &self.admin_token)
            .env("SECKILL_SESSION_SECRET", &self.session_secret)
            .env("SECKILL_WORKER_NAME", format!("chaos-{}", app.index + 1))
            .env("SECKILL_THREADS", "1")
            .env("SECKILL_RATE_PER_SESSION", "0")
            .env("SECKILL_RATE_PER_ADDRESS", "0")
            .env("SECKILL_SIGN_UP_QUOTA", "0")
            .env("SECKILL_SIGN_UP_CHALLENGE", "off")
            .env("SECKILL_PASSWORD_MEMORY_KIB", "64")
            .env("SECKILL_PASSWORD_ITERATIONS", "1")
            .env("SECKILL_PAY_TIMEOUT_MS", s.pay_timeout_ms.to_string())
            .env("SECKILL_CLAIM_IDLE_MS", s.claim_idle_ms.to_string())
            .env("SECKILL_SWEEP_MS", "250")
            .env("RUST_LOG", "warn");
        if self.kind == Kind::Full {
            // Small order-id blocks: a master killed with the day's counter empties the
            // hands within its failover, and the spare counter is drawn from.
            command.env("SECKILL_WAIT_REPLICAS", "1").env("SECKILL_ID_BLOCK", ID_BLOCK);
        }
        if offset_s != 0 {
            // The wall clock only: timers and timeouts keep the true monotonic clock.
            command
                .env("LD_PRELOAD", FAKETIME)
                .env("FAKETIME", format!("{offset_s:+}s"))
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        let child = command
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", server.display()))?;
        app.child = Some(child);
        let ready = format!("{}/readyz", app.base());
        let http = reqwest::Client::new();
        let deadline = tokio::time::Instant::now() + READY_WITHIN;
        loop {
            if http.get(&ready).send().await.is_ok_and(|r| r.status().is_success()) {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = app.child.as_mut().map(Child::try_wait) {
                return Err(format!(
                    "{} exited at start ({status}); its log ends: {}",
                    app.name(),
                    self.last_line(app)
                ));
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("{} not ready within {READY_WITHIN:?}", app.name()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The last line the app process logged (a refused start says why there).
    fn last_line(&self, app: &App) -> String {
        let log = std::fs::read(self.dir.join(format!("{}.log", app.name()))).unwrap_or_default();
        let tail = String::from_utf8_lossy(&log[log.len().saturating_sub(4_096)..]).into_owned();
        tail.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default().to_owned()
    }

    /// Kills the app process (SIGKILL) and reaps it.
    pub async fn kill(&self, app: &mut App) {
        if let Some(mut child) = app.child.take() {
            let _ = child.kill().await;
        }
    }

    /// Stops the app process as a deploy does (SIGTERM), within 20 s.
    pub async fn stop_app(&self, app: &mut App) {
        app.signal(libc::SIGCONT);
        app.signal(libc::SIGTERM);
        if let Some(mut child) = app.child.take() {
            if tokio::time::timeout(Duration::from_secs(20), child.wait()).await.is_err() {
                let _ = child.kill().await;
            }
        }
    }

    /// Kills the one Redis (SIGKILL); false on a cluster.
    pub async fn crash_redis(&self) -> bool {
        let RedisPart::Single { redis, .. } = &self.redis else { return false };
        if let Some(redis) = redis.lock().await.take() {
            redis.crash().await;
        }
        true
    }

    /// Removes the one Redis's files (it must be down): it starts again empty.
    pub fn wipe_redis(&self) -> Result<(), String> {
        let dir = self.dir.join("redis");
        std::fs::remove_dir_all(&dir).map_err(|e| format!("removing {}: {e}", dir.display()))
    }

    /// Starts the one Redis again on its port, from its append-only file.
    pub async fn start_redis(&self) -> Result<(), String> {
        let RedisPart::Single { redis, port } = &self.redis else { return Ok(()) };
        let mut redis = redis.lock().await;
        if redis.is_none() {
            *redis = Some(LocalRedis::start_on(&self.dir, *port).await?);
        }
        Ok(())
    }

    /// Kills the cluster's `pick`-th master (SIGKILL), waits `hold`, starts it again
    /// (it rejoins as a replica) and waits until every master has a replica again.
    pub async fn kill_master(&self, pick: usize, hold: Duration) -> Result<Option<String>, String> {
        let RedisPart::Cluster(cluster) = &self.redis else { return Ok(None) };
        let masters = cluster.masters().await;
        // Every other pick is the master of the day's order-id counter (its spare then
        // serves every process, `order_ids`), the rest any master.
        let counter = seckill::testing::order_id_counter(NAMESPACE, &chrono::Utc::now().format("%Y%m%d").to_string());
        let counters = match pick % 2 {
            0 => cluster.master_of(&counter, &masters).await,
            _ => None,
        };
        let Some(node) = counters.or_else(|| masters.get(pick % masters.len().max(1)).copied()) else {
            return Ok(None);
        };
        cluster.kill(node).await;
        tokio::time::sleep(hold).await;
        cluster.start_node(node).await?;
        cluster.wait_healthy(Duration::from_secs(60)).await?;
        Ok(Some(format!("redis-{}", cluster.ports[node])))
    }

    /// Cuts the cluster's `pick`-th master off for `hold`, both ways: from its replica
    /// only (nothing fails over; its writes reach no replica), or from every other node
    /// (`from_all`: the apps still reach it, the others fail it over). Then heals the
    /// links and waits until the cluster is whole.
    pub async fn cut_master_off(&self, pick: usize, hold: Duration, from_all: bool) -> Result<Option<String>, String> {
        let RedisPart::Cluster(cluster) = &self.redis else { return Ok(None) };
        let masters = cluster.masters().await;
        let Some(&master) = masters.get(pick % masters.len().max(1)) else { return Ok(None) };
        let others: Vec<usize> = if from_all {
            (0..cluster.ports.len()).filter(|i| *i != master).collect()
        } else {
            cluster.replica_of(master).await.into_iter().collect()
        };
        if others.is_empty() {
            return Ok(None);
        }
        others.iter().for_each(|&other| cluster.cut_between(master, other, true));
        tokio::time::sleep(hold).await;
        others.iter().for_each(|&other| cluster.cut_between(master, other, false));
        cluster.wait_healthy(Duration::from_secs(60)).await?;
        Ok(Some(format!("redis-{}", cluster.ports[master])))
    }

    /// Restarts PostgreSQL (an immediate stop: a crash, as far as clients see), down
    /// for `hold`; false on SQLite.
    pub async fn restart_db(&self, hold: Duration) -> Result<bool, String> {
        let DbPart::Postgres(pg) = &self.db else { return Ok(false) };
        pg.crash().await?;
        tokio::time::sleep(hold).await;
        pg.start_server().await?;
        Ok(true)
    }

    /// Fills every Redis node's memory for `hold`: its `maxmemory` set to what it holds
    /// now, so under `noeviction` (which the app requires) every write is refused with
    /// an out-of-memory error until the limit goes again.
    pub async fn fill_redis_memory(&self, hold: Duration) -> Result<(), String> {
        let ports = match &self.redis {
            RedisPart::Single { port, .. } => vec![*port],
            RedisPart::Cluster(cluster) => cluster.ports.clone(),
        };
        let mut filled = Vec::new();
        for port in ports {
            let node = redis::Client::open(format!("redis://127.0.0.1:{port}/")).map_err(|e| e.to_string())?;
            let Ok(Ok(mut redis)) =
                tokio::time::timeout(Duration::from_secs(2), node.get_multiplexed_async_connection()).await
            else {
                continue;
            };
            let info: String =
                redis::cmd("INFO").arg("memory").query_async(&mut redis).await.map_err(|e| e.to_string())?;
            let used = info.lines().find_map(|l| l.strip_prefix("used_memory:")).unwrap_or("0").trim().to_owned();
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("maxmemory")
                .arg(&used)
                .query_async(&mut redis)
                .await
                .map_err(|e| e.to_string())?;
            filled.push(redis);
        }
        tokio::time::sleep(hold).await;
        for mut redis in filled {
            let _: Result<(), _> =
                redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(0).query_async(&mut redis).await;
        }
        Ok(())
    }

    /// Cuts every pub/sub connection (the bus's subscriptions).
    pub async fn cut_pubsub(&self) {
        match &self.redis {
            RedisPart::Single { .. } => {
                let cut = async {
                    let mut redis = seckill::testing::RedisConn::open(&self.redis_url).await?;
                    redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub").query_async::<i64>(&mut redis).await
                };
                let _ = tokio::time::timeout(Duration::from_secs(2), cut).await;
            }
            RedisPart::Cluster(cluster) => cluster.cut_pubsub().await,
        }
    }

    /// Holds the database's write lock on orders for `hold` (SQLite: the one writer;
    /// PostgreSQL: the orders table locked against writes).
    pub async fn hold_write_lock(&self, hold: Duration) -> Result<(), sqlx::Error> {
        use sqlx::Connection;
        sqlx::any::install_default_drivers();
        let mut writer = sqlx::AnyConnection::connect(&self.database_url).await?;
        if matches!(self.db, DbPart::Sqlite) {
            sqlx::query("BEGIN IMMEDIATE").execute(&mut writer).await?;
        } else {
            sqlx::query("BEGIN").execute(&mut writer).await?;
            sqlx::query("LOCK TABLE orders IN EXCLUSIVE MODE").execute(&mut writer).await?;
        }
        tokio::time::sleep(hold).await;
        sqlx::query("ROLLBACK").execute(&mut writer).await?;
        Ok(())
    }

    /// The link a link fault hits, and its name: app `pick`'s link to its proxied
    /// store; or, when `to_redis` on the full topology, every app's link to the
    /// `pick`-th Redis master (the apps share each node's proxy). `None` when no master
    /// answers.
    pub async fn link(&self, pick: usize, to_redis: bool) -> Option<(Arc<Proxy>, String)> {
        if let (RedisPart::Cluster(cluster), true) = (&self.redis, to_redis) {
            let masters = cluster.masters().await;
            let &node = masters.get(pick % masters.len().max(1))?;
            return Some((cluster.client_link(node), format!("apps→redis-{}", cluster.ports[node])));
        }
        let index = pick % self.links.len();
        let store = match self.kind {
            Kind::OneBox => "redis",
            Kind::Full => "db",
        };
        Some((self.links[index].clone(), format!("app-{}→{store}", index + 1)))
    }

    /// Sets the `pick`-th Redis node to evict keys under memory pressure
    /// (`volatile-lru` under a 1 GB limit it never nears in a run), or back to the
    /// run's `noeviction` without a limit; the node's name.
    pub async fn set_evicting(&self, pick: usize, evicting: bool) -> Result<String, String> {
        let (port, name) = match &self.redis {
            RedisPart::Single { port, .. } => (*port, "redis".to_owned()),
            RedisPart::Cluster(cluster) => {
                let port = cluster.ports[pick % cluster.ports.len()];
                (port, format!("redis-{port}"))
            }
        };
        let (limit, policy) = if evicting { ("1gb", "volatile-lru") } else { ("0", "noeviction") };
        let set = async {
            let node = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
            let mut redis = node.get_multiplexed_async_connection().await?;
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("maxmemory")
                .arg(limit)
                .arg("maxmemory-policy")
                .arg(policy)
                .query_async::<()>(&mut redis)
                .await
        };
        match tokio::time::timeout(Duration::from_secs(5), set).await {
            Ok(Ok(())) => Ok(name),
            Ok(Err(e)) => Err(format!("{name}: maxmemory-policy {policy}: {e}")),
            Err(_) => Err(format!("{name} did not answer CONFIG SET within 5 s")),
        }
    }

    /// Stops everything: each app gracefully (SIGTERM, as a deploy does), then the stores.
    pub async fn stop(&self) {
        for app in &self.apps {
            self.stop_app(&mut *app.lock().await).await;
        }
        self.links.iter().for_each(|link| link.stop());
        match &self.redis {
            RedisPart::Single { redis, .. } => {
                if let Some(redis) = redis.lock().await.take() {
                    redis.stop().await;
                }
            }
            RedisPart::Cluster(cluster) => cluster.stop().await,
        }
        if let DbPart::Postgres(pg) = &self.db {
            pg.stop(&self.dir.join(POSTGRES_LOG)).await;
        }
        if let Some(disk) = &self.disk {
            disk.keep_files(&self.dir);
            disk.unmount();
        }
    }

    /// Fills the one box's database's disk for `hold`, then frees it; false when it
    /// has no disk of its own.
    pub async fn fill_disk(&self, hold: Duration) -> Result<bool, String> {
        let Some(disk) = &self.disk else { return Ok(false) };
        let filler = disk.fill()?;
        tokio::time::sleep(hold).await;
        drop(filler);
        Ok(true)
    }
}
