//! Runs the real server on 127.0.0.1:0 against the Redis in `REDIS_URL` (each test
//! gets its own key namespace) and a fresh SQLite file, and talks to it over HTTP.

pub mod logs;
pub mod process;
pub mod proxy;

use reqwest::StatusCode;
pub use seckill::client::Shopper;
use seckill::testing::Db;
use seckill::testing::RedisConn;
use seckill::testing::SaleKeys;
use seckill::{client::ApiClient, config::Config, server};
use serde_json::{json, Value};
use std::{future::Future, sync::Arc, time::Duration};
use tempfile::TempDir;
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};

pub const ADMIN_TOKEN: &str = "test-admin-token";
/// Every test shopper's password.
pub const PASSWORD: &str = "a test shopper's password";
/// Test servers' argon2id cost (KiB, passes): far below OWASP's, for speed.
pub const TEST_PASSWORD_COST: (u32, u32) = (64, 1);

/// How a test wants its server: the server's own settings ([`Config`], as `seckill
/// --help` lists them), with the tests' defaults, and whose data it runs on.
#[derive(Clone)]
pub struct Options {
    pub config: Config,
    /// Reuse another server's data (a restart, or a second process).
    pub reuse: Option<Reuse>,
}

/// The server's defaults, but: the test token and session secret, rate limits and the
/// sign-up quota and challenge off (a storm comes from one address), worker reads at most 100 ms apart, and two serving
/// threads on any machine (connections handed between runtimes). The database and the
/// Redis namespace are the test's own ([`TestApp::with`]); Redis is `REDIS_URL`'s
/// unless the test names another.
impl Default for Options {
    fn default() -> Self {
        let mut config = Config::defaults();
        config.admin_token = Some(ADMIN_TOKEN.into());
        // Shared by every process of a test, as in production: sessions survive restarts.
        config.session_secret = Some("a test session secret of more than 32 bytes".into());
        config.rate_per_session = 0;
        config.rate_per_address = 0;
        // Tests make hundreds of accounts from one address, without solving challenges.
        config.sign_up_quota = 0;
        config.sign_up_challenge = false;
        config.poll_ms = 100;
        config.threads = Some(2);
        // Tests make hundreds of accounts: cheap hashes (the cost is the hash's own).
        config.password_memory_kib = TEST_PASSWORD_COST.0;
        config.password_iterations = TEST_PASSWORD_COST.1;
        Self { config, reuse: None }
    }
}

impl Options {
    /// These options with some settings changed.
    pub fn with(mut self, change: impl FnOnce(&mut Config)) -> Self {
        change(&mut self.config);
        self
    }
}

pub struct TestApp {
    pub base: String,
    pub http: reqwest::Client,
    /// The JSON API client the load tool uses too.
    pub api: ApiClient,
    pub db: Db,
    /// The database this app (and any process reusing its data) runs on.
    pub database_url: String,
    pub redis: RedisConn,
    pub namespace: String,
    pub dir: Arc<TempDir>,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<Result<(), server::ServeError>>>,
}

/// Another server's data: its folder, Redis namespace and database.
#[derive(Clone)]
pub struct Reuse {
    pub dir: Arc<TempDir>,
    pub namespace: String,
    pub database_url: String,
}

/// A database of its own for one test: a SQLite file in `dir`, or, when
/// `TEST_POSTGRES_URL` names a PostgreSQL server (`.ci/test` starts one), a fresh
/// database there.
pub async fn fresh_database(dir: &std::path::Path) -> String {
    let Some(server) = std::env::var("TEST_POSTGRES_URL").ok().filter(|u| !u.is_empty()) else {
        return format!("sqlite://{}", dir.join("seckill.db").display());
    };
    let name = format!("t{}", rand::random::<u64>());
    let admin = connect_db(&server).await;
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&admin).await.unwrap();
    admin.close().await;
    let (base, _) = server.rsplit_once('/').expect("TEST_POSTGRES_URL ends with /<database>");
    format!("{base}/{name}")
}

/// A pool on `url` (SQLite or PostgreSQL), as the server opens one.
pub async fn connect_db(url: &str) -> Db {
    sqlx::any::install_default_drivers();
    Db::connect(url).await.unwrap()
}

/// Another writer holding the database's write lock until it is rolled back
/// (`ROLLBACK` on the connection) or dropped: on SQLite the one write lock, on
/// PostgreSQL an exclusive lock on `pg_table` (reads still go on).
pub async fn hold_write_lock(url: &str, pg_table: &str) -> sqlx::AnyConnection {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let mut writer = sqlx::AnyConnection::connect(url).await.unwrap();
    let lock = if url.starts_with("sqlite:") {
        "BEGIN IMMEDIATE".to_owned()
    } else {
        format!("BEGIN; LOCK TABLE {pg_table} IN EXCLUSIVE MODE")
    };
    sqlx::raw_sql(&lock).execute(&mut writer).await.unwrap();
    writer
}

pub fn redis_url() -> String {
    std::env::var("REDIS_URL").expect("REDIS_URL must point at a running redis-server (npm test starts one)")
}

/// A server started by [`TestApp::starting`], until it answers.
pub struct Starting {
    pub base: String,
    pub api: ApiClient,
    database_url: String,
    redis_url: String,
    namespace: String,
    dir: Arc<TempDir>,
    stop: oneshot::Sender<()>,
    handle: JoinHandle<Result<(), server::ServeError>>,
}

impl Starting {
    /// Why the server refused to start (it stopped on its own, within [`SETTLED`]).
    pub async fn refused(self) -> server::ServeError {
        match tokio::time::timeout(SETTLED, self.handle).await {
            Ok(Ok(Err(why))) => why,
            other => panic!("the server did not refuse to start: {other:?}"),
        }
    }

    /// The app, once it answers the API.
    pub async fn ready(self) -> TestApp {
        let Self { base, api, database_url, redis_url, namespace, dir, stop, handle } = self;
        let http = api.http.clone();
        let probe = format!("{base}/api/list_vouchers");
        wait_until("server answers", SETTLED, || {
            let (http, probe) = (http.clone(), probe.clone());
            async move { http.post(&probe).json(&json!({})).send().await.is_ok_and(|r| r.status().is_success()) }
        })
        .await;
        let db = connect_db(&database_url).await;
        let redis = RedisConn::open(&redis_url).await.unwrap();
        TestApp { base, http, api, db, database_url, redis, namespace, dir, stop: Some(stop), handle: Some(handle) }
    }
}

impl TestApp {
    pub async fn spawn() -> Self {
        Self::with(Options::default()).await
    }

    pub async fn with(opts: Options) -> Self {
        Self::starting(opts).await.ready().await
    }

    /// A server started, not waited for: it may still be waiting for its stores.
    pub async fn starting(opts: Options) -> Starting {
        // Server warnings show in a failing test's output.
        logs::capture();
        let Options { mut config, reuse } = opts;
        let Reuse { dir, namespace, database_url } = match reuse {
            Some(reuse) => reuse,
            None => {
                let dir = Arc::new(TempDir::new().unwrap());
                let database_url = fresh_database(dir.path()).await;
                Reuse { dir, namespace: format!("t{}", rand::random::<u64>()), database_url }
            }
        };
        let redis_url = config.redis_url.get_or_insert_with(redis_url).clone();
        config.database_url = database_url.clone();
        config.redis_namespace = namespace.clone();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        // The site's name, as cargo-leptos would compile it in (`cargo test` does not).
        let leptos = leptos::config::LeptosOptions::builder().output_name("seckill").site_root("target/site").build();
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(server::serve(config, leptos, listener, async {
            let _ = stopped.await;
        }));
        let api = ApiClient::new(&base, ADMIN_TOKEN, 256);
        Starting { base, api, database_url, redis_url, namespace, dir, stop, handle }
    }

    /// Options that restart this app's data under a new process.
    pub fn restart_options(&self) -> Options {
        let reuse =
            Reuse { dir: self.dir.clone(), namespace: self.namespace.clone(), database_url: self.database_url.clone() };
        Options { reuse: Some(reuse), ..Options::default() }
    }

    /// Stops the server gracefully and waits for it (worker included).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(h) = self.handle.take() {
            h.await.unwrap().unwrap();
        }
    }

    /// POSTs JSON to `/api/<name>` with optional extra headers; returns status and body.
    pub async fn call(&self, name: &str, body: Value, headers: &[(&str, &str)]) -> (StatusCode, Value) {
        self.api.call(name, body, headers).await.unwrap()
    }

    /// A call with the admin token (bearer); panics unless it succeeds.
    pub async fn admin(&self, name: &str, body: Value) -> Value {
        self.api.admin(name, body).await.unwrap()
    }

    /// An operator's call (the admin token); returns status and body.
    pub async fn operator(&self, name: &str, body: Value) -> (StatusCode, Value) {
        self.api.operator(name, body).await.unwrap()
    }

    /// An operator's call (the admin token) on the sale `voucher_id`: `args` and its id.
    pub async fn on_sale(&self, call: &str, voucher_id: i64, mut args: Value) -> (StatusCode, Value) {
        args["voucher_id"] = json!(voucher_id);
        self.operator(call, args).await
    }

    /// Signs a shopper in with [`PASSWORD`], making the account when the name is new;
    /// panics unless it succeeds.
    pub async fn sign_in(&self, name: &str) -> Shopper {
        self.api.shopper(name, PASSWORD).await.unwrap()
    }

    /// Signs in `n` shoppers named `<prefix>-<i>` (as [`TestApp::sign_in`]), 64 at a time.
    pub async fn sign_in_many(&self, prefix: &str, n: usize) -> Vec<Shopper> {
        self.api.shoppers(prefix, n, PASSWORD, 64).await.unwrap()
    }

    /// Creates a voucher whose window is `[now + begins_in, now + ends_in]` seconds.
    pub async fn create_voucher(&self, stock: i64, begins_in: i64, ends_in: i64) -> i64 {
        let now = chrono::Utc::now();
        let title = format!("Voucher {}", rand::random::<u16>());
        let (begins, ends) = (now + chrono::Duration::seconds(begins_in), now + chrono::Duration::seconds(ends_in));
        self.api.create_voucher(&title, stock, begins, ends).await.unwrap()
    }

    /// [`Self::create_voucher`], its units split over `shards` buckets.
    pub async fn create_sharded(&self, stock: i64, (begins_in, ends_in): (i64, i64), shards: u32) -> i64 {
        let now = chrono::Utc::now();
        let title = format!("Voucher {}", rand::random::<u16>());
        let window = (now + chrono::Duration::seconds(begins_in), now + chrono::Duration::seconds(ends_in));
        self.api.create_sharded_voucher(&title, stock, window, shards).await.unwrap()
    }

    /// A grab; returns status and body.
    pub async fn grab(&self, who: &Shopper, voucher_id: i64) -> (StatusCode, Value) {
        self.api.grab(who, voucher_id).await.unwrap()
    }

    /// A grab by each of `shoppers`, `at_once` in flight: each shopper's id, the
    /// status and the body, in the order they were answered.
    pub async fn grab_all<'a>(
        &self,
        shoppers: impl Iterator<Item = &'a Shopper>,
        voucher_id: i64,
        at_once: usize,
    ) -> Vec<(i64, u16, Value)> {
        use futures::StreamExt;
        // A grab shed by admission control (a busy machine) was never decided: it is
        // sent again after a pause, as the shop page does, until a deadline.
        let grabs = shoppers.map(|s| async move {
            let deadline = tokio::time::Instant::now() + SETTLED;
            loop {
                let (status, body) = self.grab(s, voucher_id).await;
                let shed =
                    status == StatusCode::SERVICE_UNAVAILABLE && body["message"] == seckill::testing::SHED_MESSAGE;
                if !shed || tokio::time::Instant::now() >= deadline {
                    return (s.user_id, status.as_u16(), body);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        futures::stream::iter(grabs).buffer_unordered(at_once).collect().await
    }

    pub async fn stats(&self, voucher_id: i64) -> Value {
        self.api.stats(voucher_id).await.unwrap()
    }

    /// Polls `sale_stats` until `done` holds for it.
    pub async fn wait_for_stats(&self, what: &str, voucher_id: i64, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + SETTLED;
        loop {
            let s = self.stats(voucher_id).await;
            if done(&s) {
                return s;
            }
            assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}: {s}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn keys(&self, voucher_id: i64) -> SaleKeys {
        SaleKeys::clone(&self.backend().keys(voucher_id))
    }

    /// A handle on this app's stores, as its background tasks hold one.
    pub fn backend(&self) -> seckill::testing::Backend {
        seckill::testing::Backend::new(self.db.clone(), self.redis.clone(), &self.namespace)
    }
}

/// How long a test waits for what the server does by itself within about a second: a
/// sampler round (every 250 ms), a worker's read (at most 100 ms apart in tests), a
/// sweep, a pub/sub message, a closed connection noticed, a Redis reconnection (about
/// a second apart). Ten times the slowest of those. The suite's own load (two tests at
/// once, each with servers of two threads, beside PostgreSQL and six Redis nodes on two
/// cores) delays a thread by milliseconds, not seconds: in the stress runs before these
/// limits were written down, no such wait came near them.
pub const SOON: Duration = Duration::from_secs(10);

/// How long a test waits for work that grows with what the test made: a storm's
/// orders persisted (hundreds to a few thousand, at thousands a second), a process
/// started (migrations, Redis, warm-up), orders taken over after a claim idle time of
/// a second, a cluster made and in sync. Ten times what the largest takes under the
/// suite's own load.
pub const SETTLED: Duration = Duration::from_secs(30);

/// How long a drill may run: ten times the slowest one here, on a busy machine.
pub const DRILL_LIMIT: Duration = Duration::from_secs(240);

/// Ends the whole test run when a drill is still going after [`DRILL_LIMIT`]: a drill
/// that starts servers of its own can wedge in ways no deadline inside it catches, and
/// a wedged drill must fail CI at once, with its name, instead of holding it for
/// hours. Disarmed when dropped, at the end of the drill (its thread then hears the
/// channel close).
pub struct Watchdog {
    _armed: std::sync::mpsc::Sender<()>,
}

impl Watchdog {
    /// Armed on the test's own thread, which the test harness names after the test.
    pub fn arm() -> Self {
        let drill = std::thread::current().name().unwrap_or("a drill").to_owned();
        let (done, finished) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(DRILL_LIMIT) {
                // Straight to stderr: `eprintln!` here would go to the test's captured
                // output, which an abort throws away.
                let said = format!("drill {drill} still running after {DRILL_LIMIT:?}: ending the test run\n");
                let _ = std::io::Write::write_all(&mut std::io::stderr(), said.as_bytes());
                std::process::abort();
            }
        });
        Self { _armed: done }
    }
}

/// An HTTP client whose requests come from another loopback address (`127.0.0.<n>`):
/// another caller, as the server's per-address limits see it.
pub fn client_from(n: u8) -> reqwest::Client {
    reqwest::Client::builder().local_address(std::net::IpAddr::from([127, 0, 0, n])).build().unwrap()
}

/// Holds one of the server's request slots (`max_requests`) until dropped: a request
/// whose body never comes. It asks to be told to go on (`Expect: 100-continue`), which
/// the server does when it starts reading the body: after the request took its slot.
/// Nothing else is sent until then, so no other request can hold the slot at that
/// moment and have this one refused instead.
pub async fn hold_a_slot(app: &TestApp) -> tokio::net::TcpStream {
    hold_a_slot_from(app, 1).await
}

/// [`hold_a_slot`], from loopback address `127.0.0.<n>` (another caller for `n` ≠ 1).
pub async fn hold_a_slot_from(app: &TestApp, n: u8) -> tokio::net::TcpStream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind((std::net::Ipv4Addr::new(127, 0, 0, n), 0).into()).unwrap();
    let mut holder = socket.connect(app.base.trim_start_matches("http://").parse().unwrap()).await.unwrap();
    let head = "POST /api/sign_in HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
                Content-Length: 100\r\nExpect: 100-continue\r\n\r\n";
    holder.write_all(head.as_bytes()).await.unwrap();
    let mut said = vec![0u8; 1024];
    // The server answers every request within its request timeout (30 s), if only with
    // a 503: a longer wait than that would wait for nothing.
    let read = tokio::time::timeout(Duration::from_secs(40), holder.read(&mut said)).await;
    let said = String::from_utf8_lossy(&said[..read.expect("an answer within the request timeout").unwrap()]);
    assert!(said.starts_with("HTTP/1.1 100 Continue"), "the request holding the slot was answered: {said}");
    holder
}

/// Polls `check` every 50 ms until it holds; fails the test after `limit`.
pub async fn wait_until<F, Fut>(what: &str, limit: Duration, check: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits, if need be, until the UTC day has more than a minute left: a test that
/// names the day's order-id counter must not see the day change under it.
pub async fn clear_of_midnight() {
    use chrono::Timelike;
    loop {
        let left = 86_400 - u64::from(chrono::Utc::now().num_seconds_from_midnight());
        if left > 60 {
            return;
        }
        tokio::time::sleep(Duration::from_secs(left + 1)).await;
    }
}

/// The error code of a refusal body.
pub fn code(body: &Value) -> &str {
    body["code"].as_str().unwrap_or("<no code>")
}

/// An open Server-Sent Events feed, read frame by frame.
pub struct Feed {
    body: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buffer: String,
}

impl Feed {
    /// Opens `/api/live` (`shop` for the shoppers' view), as admin unless `shop`.
    pub async fn open(app: &TestApp, shop: bool) -> Feed {
        let url = format!("{}/api/live{}", app.base, if shop { "?view=shop" } else { "" });
        let mut req = app.http.get(url);
        if !shop {
            req = req.header("authorization", format!("Bearer {ADMIN_TOKEN}"));
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 200);
        assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
        Feed { body: Box::pin(res.bytes_stream()), buffer: String::new() }
    }

    /// The next data frame, parsed; fails the test if none comes within `limit`.
    pub async fn next(&mut self, limit: Duration) -> Value {
        use futures::StreamExt;
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let data: Vec<&str> =
                    block.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
                if !data.is_empty() {
                    return serde_json::from_str(&data.join("\n")).unwrap();
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next()).await.expect("no frame in time");
            let chunk = chunk.expect("feed ended").unwrap();
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Reads frames until one satisfies `want`; fails after `limit`.
    pub async fn until(&mut self, limit: Duration, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let frame = self.next(left).await;
            if want(&frame) {
                return frame;
            }
        }
    }
}
