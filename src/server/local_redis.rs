//! A private `redis-server` for runs without `REDIS_URL`: started on a free loopback
//! port with its data under `./data/redis` (append-only file, synced on every write),
//! stopped when the app stops.

use std::{path::Path, process::Stdio, time::Duration};
use tokio::process::{Child, Command};

pub struct LocalRedis {
    child: Child,
    pub url: String,
    pub port: u16,
}

impl LocalRedis {
    /// Starts `redis-server` on a free port and waits (up to 10 s) until it answers PING.
    pub async fn start(data_dir: &Path) -> Result<Self, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("finding a free port: {e}"))?
            .port();
        Self::start_on(data_dir, port).await
    }

    /// Starts `redis-server` on `port` with the data under `data_dir` (a restart finds
    /// the append-only file of the last run there).
    pub async fn start_on(data_dir: &Path, port: u16) -> Result<Self, String> {
        let dir = data_dir.join("redis");
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let child = Command::new("redis-server")
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
        let url = format!("redis://127.0.0.1:{port}/");
        let me = Self { child, url, port };
        me.wait_ready().await?;
        Ok(me)
    }

    async fn wait_ready(&self) -> Result<(), String> {
        let client = redis::Client::open(self.url.as_str()).map_err(|e| e.to_string())?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = client.get_multiplexed_async_connection().await {
                if redis::cmd("PING").query_async::<String>(&mut c).await.is_ok() {
                    return Ok(());
                }
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("redis-server did not answer on {}", self.url));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
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
