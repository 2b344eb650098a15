//! The full topology's database: a throw-away PostgreSQL cluster, made, crashed,
//! restarted and removed by `.ci/pg` (compiled in: the one place that decides where
//! such a cluster lives and how it is started as the `postgres` user; its folder is
//! under `/tmp`, never under the checkout, which may sit in a folder `postgres` cannot
//! enter). Its log is copied beside the run's other logs when it stops.

use std::{
    path::{Path, PathBuf},
    sync::atomic::{AtomicBool, Ordering},
};
use tokio::process::Command;

/// `.ci/pg`, run with `bash -c`.
const PG: &str = include_str!("../../../.ci/pg");

pub struct Postgres {
    /// The cluster's folder (data, socket, logs), as `.ci/pg start` printed it.
    dir: PathBuf,
    port: u16,
    removed: AtomicBool,
}

impl Postgres {
    pub async fn start(port: u16) -> Result<Self, String> {
        let dir = pg(&["start", &port.to_string()]).await?;
        Ok(Self { dir: PathBuf::from(dir.trim()), port, removed: AtomicBool::new(false) })
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Where the cluster lives while it runs (its `server.log` is there).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts the server again on its port, after `crash`.
    pub async fn start_server(&self) -> Result<(), String> {
        pg(&["restart", &self.dir.to_string_lossy()]).await.map(drop)
    }

    /// Stops the server at once (`-m immediate`: no checkpoint, connections cut).
    pub async fn crash(&self) -> Result<(), String> {
        pg(&["crash", &self.dir.to_string_lossy()]).await.map(drop)
    }

    /// Stops the server, copies its log to `log` and removes its folder.
    pub async fn stop(&self, log: &Path) {
        let _ = std::fs::copy(self.dir.join("server.log"), log);
        let _ = pg(&["remove", &self.dir.to_string_lossy()]).await;
        self.removed.store(true, Ordering::Relaxed);
    }
}

/// A run that ends early (a failed start, an error) leaves no server behind.
impl Drop for Postgres {
    fn drop(&mut self) {
        if !self.removed.load(Ordering::Relaxed) {
            let _ = std::process::Command::new("bash").args(["-c", PG, "pg", "remove"]).arg(&self.dir).output();
        }
    }
}

/// Runs `.ci/pg` with `args`; what it printed, or why it failed.
async fn pg(args: &[&str]) -> Result<String, String> {
    let out =
        Command::new("bash").args(["-c", PG, "pg"]).args(args).output().await.map_err(|e| format!("bash: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("PostgreSQL ({}): {}", args[0], String::from_utf8_lossy(&out.stderr).trim()))
    }
}
