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
        let url = format!("redis://127.0.0.1:{port}/");
        let mut me = Self { child, url, port };
        let ours = dir.canonicalize().map_err(|e| format!("reading {}: {e}", dir.display()))?;
        me.wait_ready(&ours).await?;
        Ok(me)
    }

    /// Waits until the server answers, and checks that the one answering is ours (its
    /// data folder is `dir`): one that lost its port exits, and whatever answers there
    /// instead must not be taken for it.
    async fn wait_ready(&mut self, dir: &Path) -> Result<(), String> {
        let client = redis::Client::open(self.url.as_str()).map_err(|e| e.to_string())?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("redis-server exited at start ({status}); is port {} taken?", self.port));
            }
            if let Ok(mut c) = client.get_multiplexed_async_connection().await {
                let answer = redis::cmd("CONFIG").arg("GET").arg("dir").query_async::<Vec<String>>(&mut c).await;
                match answer {
                    Ok(d) if d.get(1).is_some_and(|d| Path::new(d) == dir) => return Ok(()),
                    Ok(_) => return Err(format!("another server answers on port {}", self.port)),
                    Err(_) => {}
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
