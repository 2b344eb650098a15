//! The server as a child process (the `seckill` binary), for drills that kill it with
//! SIGKILL or stop it with SIGTERM, as an operator or a crash would.

use crate::support::{fresh_database, wait_until, ADMIN_TOKEN};
use seckill::client::ApiClient;
use serde_json::json;
use std::{path::Path, process::ExitStatus, process::Stdio, time::Duration};
use tokio::process::{Child, Command};

/// Settings every process of one drill shares: one Redis, one database, one namespace.
#[derive(Clone)]
pub struct Shared {
    pub redis_url: String,
    pub database_url: String,
    pub namespace: String,
}

impl Shared {
    /// A fresh database (see [`fresh_database`]) and a fresh namespace on `redis_url`.
    pub async fn new(dir: &Path, redis_url: &str) -> Self {
        Self {
            redis_url: redis_url.to_owned(),
            database_url: fresh_database(dir).await,
            namespace: format!("t{}", rand::random::<u64>()),
        }
    }
}

pub struct Process {
    child: Child,
    pub api: ApiClient,
}

impl Process {
    /// Starts the binary with the shared settings plus `extra` (`SECKILL_*` variables),
    /// and waits until it answers.
    pub async fn start(shared: &Shared, extra: &[(&str, &str)]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(env!("CARGO_BIN_EXE_seckill"))
            .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}"))
            .env("REDIS_URL", &shared.redis_url)
            .env("DATABASE_URL", &shared.database_url)
            .env("SECKILL_REDIS_NAMESPACE", &shared.namespace)
            .env("SECKILL_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("SECKILL_SESSION_SECRET", "a test session secret of more than 32 bytes")
            .env("SECKILL_RATE_PER_SESSION", "0")
            .env("SECKILL_RATE_PER_ADDRESS", "0")
            .env("SECKILL_POLL_MS", "100")
            .env("RUST_LOG", "error")
            .env("LEPTOS_OUTPUT_NAME", "seckill")
            .envs(extra.iter().copied())
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the seckill binary starts");
        let api = ApiClient::new(&format!("http://127.0.0.1:{port}"), ADMIN_TOKEN, 256);
        let probe = api.clone();
        wait_until("the process answers", Duration::from_secs(30), || {
            let probe = probe.clone();
            async move { probe.call("list_vouchers", json!({}), &[]).await.is_ok_and(|(s, _)| s.is_success()) }
        })
        .await;
        Self { child, api }
    }

    /// SIGKILL: no clean-up of any kind, as a crash or the OOM killer.
    pub async fn kill9(mut self) {
        self.child.kill().await.unwrap();
    }

    /// SIGTERM, as a process manager stops it; waits up to `limit` for it to exit.
    pub async fn terminate(mut self, limit: Duration) -> Option<ExitStatus> {
        let pid = self.child.id().expect("still running").to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().await.unwrap();
        assert!(sent.success());
        tokio::time::timeout(limit, self.child.wait()).await.ok().map(Result::unwrap)
    }
}
