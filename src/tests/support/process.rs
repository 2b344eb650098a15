//! The server as a child process (the `seckill` binary), for drills that kill it with
//! SIGKILL or stop it with SIGTERM, as an operator or a crash would.

use super::{fresh_database, wait_until, ADMIN_TOKEN, SETTLED, TEST_PASSWORD_COST};
use seckill::{client::ApiClient, server::child::ends_with_parent};
use serde_json::json;
use std::{
    path::{Path, PathBuf},
    process::{ExitStatus, Stdio},
    time::Duration,
};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

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
    /// and waits until it answers. It binds a port of the kernel's choosing and prints
    /// which: a port picked here and bound there could be taken in between, by another
    /// drill's process or any outgoing connection. It dies with the test run.
    pub async fn start(shared: &Shared, extra: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_seckill"));
        let mut child = ends_with_parent(&mut command, libc::SIGKILL)
            .env("LEPTOS_SITE_ADDR", "127.0.0.1:0")
            .env("REDIS_URL", &shared.redis_url)
            .env("DATABASE_URL", &shared.database_url)
            .env("SECKILL_REDIS_NAMESPACE", &shared.namespace)
            .env("SECKILL_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("SECKILL_SESSION_SECRET", "a test session secret of more than 32 bytes")
            .env("SECKILL_RATE_PER_SESSION", "0")
            .env("SECKILL_PASSWORD_MEMORY_KIB", TEST_PASSWORD_COST.0.to_string())
            .env("SECKILL_PASSWORD_ITERATIONS", TEST_PASSWORD_COST.1.to_string())
            .env("SECKILL_RATE_PER_ADDRESS", "0")
            .env("SECKILL_SIGN_UP_QUOTA", "0")
            .env("SECKILL_SIGN_UP_CHALLENGE", "off")
            .env("SECKILL_POLL_MS", "100")
            // Two serving threads on any machine: connections handed between runtimes.
            .env("SECKILL_THREADS", "2")
            .env("RUST_LOG", "error")
            .env("LEPTOS_OUTPUT_NAME", "seckill")
            .env("LEPTOS_SITE_ROOT", stub_site())
            .envs(extra.iter().copied())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the seckill binary starts");
        let base = listening_on(&mut child).await;
        let api = ApiClient::new(&base, ADMIN_TOKEN, 256);
        let probe = api.clone();
        wait_until("the process answers", SETTLED, || {
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

    /// SIGTERM, as a process manager stops it; waits up to `limit` for it to exit (the
    /// server promises to within its two graces of 10 s: requests, then background tasks).
    pub async fn terminate(mut self, limit: Duration) -> Option<ExitStatus> {
        let pid = self.child.id().expect("still running").to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().await.unwrap();
        assert!(sent.success());
        tokio::time::timeout(limit, self.child.wait()).await.ok().map(Result::unwrap)
    }
}

/// A site for child servers: the files a page loads, empty (the WASM under both the
/// names Leptos may give it), and the manifest of a split build. A server refuses to
/// start without its site, or with one not built as deployed (`server::site`); no drill
/// loads a page's scripts (Playwright does, on the release build).
fn stub_site() -> PathBuf {
    let site = Path::new(env!("CARGO_TARGET_TMPDIR")).join("stub-site");
    let pkg = site.join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    for file in ["seckill.js", "seckill.wasm", "seckill_bg.wasm", "seckill.css", "__wasm_split_manifest.json"] {
        std::fs::write(pkg.join(file), b"").unwrap();
    }
    site
}

/// Runs the binary with `envs` (the test run's environment besides) until it exits,
/// which it must do within the settling limit (a server that started would not): its status and
/// what it wrote to stderr.
pub async fn run_to_exit(envs: &[(&str, &str)]) -> (ExitStatus, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_seckill"));
    let child = ends_with_parent(&mut command, libc::SIGKILL)
        .env("LEPTOS_SITE_ADDR", "127.0.0.1:0")
        .env_remove("LEPTOS_OUTPUT_NAME")
        .env_remove("LEPTOS_SITE_ROOT")
        .envs(envs.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the seckill binary starts");
    let out = tokio::time::timeout(SETTLED, child.wait_with_output()).await;
    let out = out.expect("the process exits").unwrap();
    (out.status, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The `http://address` a starting process prints once it listens; the rest of its
/// output is read and dropped, so a full pipe never stalls it.
async fn listening_on(child: &mut Child) -> String {
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut lines = BufReader::new(stdout).lines();
    let found = tokio::time::timeout(SETTLED, async {
        while let Some(line) = lines.next_line().await.ok()? {
            if let Some(rest) = line.split_once("listening on ").map(|(_, rest)| rest) {
                return rest.split_whitespace().next().map(str::to_owned);
            }
        }
        None
    })
    .await;
    let base = found.ok().flatten().expect("the process says where it listens");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    base
}
