//! A private `redis-server` for runs without `REDIS_URL`: started on a free loopback
//! port with its data under `./data/redis` (append-only file, synced on every write),
//! stopped when the app stops.

use std::{
    os::{
        linux::net::SocketAddrExt,
        unix::net::{SocketAddr, UnixListener},
    },
    path::Path,
    process::Stdio,
    sync::Mutex,
    time::Duration,
};
use tokio::process::{Child, Command};

/// Ports [`steady_port`] hands out: below Linux's default ephemeral range
/// (32768–60999, `net.ipv4.ip_local_port_range`) with their cluster-bus ports
/// (port + 10000) too.
const STEADY_PORTS: std::ops::Range<u16> = 12_000..22_000;

/// A free loopback port for a Redis that is stopped and started again on it (a drill's
/// restart, a node rejoining its cluster), with port + 10000 free too when `bus` (a
/// cluster node's bus). A port the kernel picked (`bind` to port 0) is in its
/// ephemeral range, from which it also hands out the local ends of outgoing
/// connections: between the stop and the start any connection could take it (about
/// once in a thousand test runs). These are below that range, and each is claimed
/// for this process's life ([`claim`]): no other process that picks ports here (a
/// second test run, the other of two chaos runs) takes one while its server is down.
pub fn steady_port(bus: bool) -> Result<u16, String> {
    let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
    for _ in 0..10_000 {
        let port = rand::random_range(STEADY_PORTS);
        if free(port) && (!bus || free(port + 10_000)) && claim(port) {
            return Ok(port);
        }
    }
    Err(format!("no free loopback port between {} and {}", STEADY_PORTS.start, STEADY_PORTS.end))
}

/// Claims `port` for this process's life against every process that claims ports so:
/// an abstract Unix socket named after it, held open, which the kernel frees when the
/// process ends however it ends (no file is left behind). False if it is claimed. The
/// test scripts' `free_ports` (`.ci/redis.sh`) claims its ports under the same name.
fn claim(port: u16) -> bool {
    static CLAIMS: Mutex<Vec<UnixListener>> = Mutex::new(Vec::new());
    let name = format!("seckill-steady-port-{port}");
    let Ok(listener) = SocketAddr::from_abstract_name(name).and_then(|a| UnixListener::bind_addr(&a)) else {
        return false;
    };
    CLAIMS.lock().unwrap_or_else(|e| e.into_inner()).push(listener);
    true
}

pub struct LocalRedis {
    child: Child,
    pub url: String,
    pub port: u16,
}

impl LocalRedis {
    /// Starts `redis-server` on a free port and waits (up to 10 s) until it answers. A
    /// port found free can be taken before Redis binds it; then it tries another.
    pub async fn start(data_dir: &Path) -> Result<Self, String> {
        let mut failed = String::new();
        for _ in 0..3 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| format!("finding a free port: {e}"))?
                .port();
            match Self::start_on(data_dir, port).await {
                Ok(redis) => return Ok(redis),
                Err(e) => failed = e,
            }
        }
        Err(failed)
    }

    /// Starts `redis-server` on a [`steady_port`]: for a Redis that will be started
    /// again on its port ([`Self::start_on`]), after a crash or a stop. A port taken
    /// before Redis binds it (by a program that does not claim ports) is left for
    /// another, as [`Self::start`] does.
    pub async fn start_steady(data_dir: &Path) -> Result<Self, String> {
        let mut failed = String::new();
        for _ in 0..3 {
            match Self::start_on(data_dir, steady_port(false)?).await {
                Ok(redis) => return Ok(redis),
                Err(e) => failed = e,
            }
        }
        Err(failed)
    }

    /// Starts `redis-server` on `port` with the data under `data_dir` (a restart finds
    /// the append-only file of the last run there).
    pub async fn start_on(data_dir: &Path, port: u16) -> Result<Self, String> {
        let dir = data_dir.join("redis");
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let mut command = Command::new("redis-server");
        let child = super::child::ends_with_parent(&mut command, libc::SIGTERM)
            .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", ""])
            // Every write reaches the disk before Redis answers: a grab answered
            // `queued` survives a crash of Redis or of the machine.
            .args(["--appendonly", "yes", "--appendfsync", "always"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting redis-server (is it installed? `npm start` installs it): {e}"))?;
        let mut me = Self { child, url: format!("redis://127.0.0.1:{port}/"), port };
        wait_own(&mut me.child, port, &dir).await?;
        Ok(me)
    }

    /// Kills it without warning (SIGKILL), as a crash would, and reaps it.
    pub async fn crash(mut self) {
        let _ = self.child.kill().await;
    }

    /// Asks Redis to save and exit, then reaps it.
    pub async fn stop(mut self) {
        if let Ok(client) = redis::Client::open(self.url.as_str()) {
            if let Ok(mut c) = client.get_multiplexed_async_connection().await {
                let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").query_async(&mut c).await;
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        let _ = self.child.kill().await;
    }
}

/// Waits (up to 10 s) until the `redis-server` just started as `child` answers on
/// `port`, and checks that the one answering is that one (its data folder is `dir`):
/// a server that lost its port to another exits, and whatever answers there instead
/// must not be taken for it. The tests' cluster nodes start the same way.
pub async fn wait_own(child: &mut Child, port: u16, dir: &Path) -> Result<(), String> {
    let ours = dir.canonicalize().map_err(|e| format!("reading {}: {e}", dir.display()))?;
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).map_err(|e| e.to_string())?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Duration::from_secs(1))
        .set_response_timeout(Duration::from_secs(2));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("redis-server exited at start ({status}); is port {port} taken?"));
        }
        if let Ok(mut c) = client.get_multiplexed_async_connection_with_config(&config).await {
            match redis::cmd("CONFIG").arg("GET").arg("dir").query_async::<Vec<String>>(&mut c).await {
                Ok(d) if d.get(1).is_some_and(|d| Path::new(d) == ours) => return Ok(()),
                Ok(_) => return Err(format!("another server answers on port {port}")),
                Err(_) => {}
            }
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("redis-server did not answer on port {port} within 10 s"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
