//! The one-box topology a run is made on: one Redis with its append-only file
//! (`appendfsync always`, the one-box default), one SQLite file, and several app
//! processes of the release build (the binary beside this one) sharing them. Each
//! part can be hit: an app killed and started again or stopped and continued, Redis
//! killed and started again from its file, the database's write lock held.

use seckill::server::local_redis::LocalRedis;
use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};
use tokio::{
    process::{Child, Command},
    sync::Mutex,
};

/// How long an app may take to answer `/readyz` after it starts (a restart under a
/// worker name whose holder was just killed waits for that name's lease to lapse).
const READY_WITHIN: Duration = Duration::from_secs(60);

/// Settings every app process gets.
pub struct AppSettings {
    pub pay_timeout_ms: u64,
    pub claim_idle_ms: u64,
}

pub struct OneBox {
    dir: PathBuf,
    pub admin_token: String,
    session_secret: String,
    pub database_url: String,
    pub redis_url: String,
    redis_port: u16,
    pub redis: Mutex<Option<LocalRedis>>,
    pub apps: Vec<Mutex<App>>,
    ports: Vec<u16>,
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

    /// Sends `signal` to the process (SIGKILL, SIGSTOP, SIGCONT).
    pub fn signal(&self, signal: libc::c_int) {
        if let Some(pid) = self.child.as_ref().and_then(Child::id) {
            // SAFETY: kill(2) on a child this run started and has not reaped.
            unsafe { libc::kill(pid as libc::pid_t, signal) };
        }
    }
}

impl OneBox {
    /// Starts Redis and `processes` app processes under `dir`, each ready before the
    /// next starts (SQLite's migrations take no lock between processes).
    pub async fn start(dir: &Path, processes: usize, settings: AppSettings) -> Result<Self, String> {
        let redis = LocalRedis::start_on(dir, free_port()?).await?;
        let ports = (0..processes).map(|_| free_port()).collect::<Result<Vec<_>, _>>()?;
        let apps =
            ports.iter().enumerate().map(|(index, &port)| Mutex::new(App { index, port, child: None })).collect();
        let stamp = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default();
        let me = Self {
            dir: dir.to_owned(),
            admin_token: format!("chaos-admin-{stamp}"),
            session_secret: format!("chaos-session-secret-{stamp}-of-more-than-32-bytes"),
            database_url: format!("sqlite://{}/chaos.db", dir.display()),
            redis_url: redis.url.clone(),
            redis_port: redis.port,
            redis: Mutex::new(Some(redis)),
            apps,
            ports,
            settings,
        };
        for app in &me.apps {
            me.start_app(&mut *app.lock().await).await?;
        }
        Ok(me)
    }

    /// Each app's address (its port stays when it is started again).
    pub fn bases(&self) -> Vec<String> {
        self.ports.iter().map(|port| format!("http://127.0.0.1:{port}")).collect()
    }

    /// Starts the app process (again) and waits until it answers `/readyz`.
    pub async fn start_app(&self, app: &mut App) -> Result<(), String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let server = exe.with_file_name("seckill");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{}.log", app.name())))
            .map_err(|e| e.to_string())?;
        let s = &self.settings;
        let child = Command::new(&server)
            .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{}", app.port))
            .env("DATABASE_URL", &self.database_url)
            .env("REDIS_URL", &self.redis_url)
            .env("SECKILL_ADMIN_TOKEN", &self.admin_token)
            .env("SECKILL_SESSION_SECRET", &self.session_secret)
            .env("SECKILL_WORKER_NAME", format!("chaos-{}", app.index + 1))
            .env("SECKILL_THREADS", "1")
            .env("SECKILL_RATE_PER_SESSION", "0")
            .env("SECKILL_RATE_PER_ADDRESS", "0")
            .env("SECKILL_PASSWORD_MEMORY_KIB", "64")
            .env("SECKILL_PASSWORD_ITERATIONS", "1")
            .env("SECKILL_PAY_TIMEOUT_MS", s.pay_timeout_ms.to_string())
            .env("SECKILL_CLAIM_IDLE_MS", s.claim_idle_ms.to_string())
            .env("SECKILL_SWEEP_MS", "250")
            .env("RUST_LOG", "warn")
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
                return Err(format!("{} exited at start ({status}); see its log", app.name()));
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("{} not ready within {READY_WITHIN:?}", app.name()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Kills the app process (SIGKILL) and reaps it.
    pub async fn kill(&self, app: &mut App) {
        if let Some(mut child) = app.child.take() {
            let _ = child.kill().await;
        }
    }

    /// Kills Redis (SIGKILL).
    pub async fn crash_redis(&self) {
        if let Some(redis) = self.redis.lock().await.take() {
            redis.crash().await;
        }
    }

    /// Starts Redis again on its port, from its append-only file.
    pub async fn start_redis(&self) -> Result<(), String> {
        let mut redis = self.redis.lock().await;
        if redis.is_none() {
            *redis = Some(LocalRedis::start_on(&self.dir, self.redis_port).await?);
        }
        Ok(())
    }

    /// Stops everything: each app gracefully (SIGTERM, as a deploy does), then Redis.
    pub async fn stop(&self) {
        for app in &self.apps {
            let mut app = app.lock().await;
            app.signal(libc::SIGCONT);
            app.signal(libc::SIGTERM);
            if let Some(mut child) = app.child.take() {
                if tokio::time::timeout(Duration::from_secs(20), child.wait()).await.is_err() {
                    let _ = child.kill().await;
                }
            }
        }
        if let Some(redis) = self.redis.lock().await.take() {
            redis.stop().await;
        }
    }
}

/// A loopback port nothing listens on now, below the range the kernel hands out to
/// outgoing connections (32768 and up on Linux): a process down for a while gets its
/// port back when it starts again, which a client connection's port could otherwise
/// have taken meanwhile.
fn free_port() -> Result<u16, String> {
    for _ in 0..1_000 {
        let port = rand::random_range(20_000..32_000);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err("no free loopback port between 20000 and 32000".to_owned())
}
