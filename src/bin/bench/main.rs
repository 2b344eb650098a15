//! Load tool: measures a running server through the JSON API, beside the physical
//! limit of a grab, Redis running the gate script on its own, in one run:
//!
//! 1. signs shoppers in (not measured with the grabs);
//! 2. the raw gate: `redis-benchmark` running `lua/grab.lua` by EVALSHA with random
//!    users on the same Redis (single Redis only), on keys of its own;
//! 3. the granted storm: one grab per shopper against ample stock, until every order
//!    is persisted, with the CPU time server and Redis spent on it (from `/proc`);
//! 4. the overload storm: the same shoppers over three times the connections, so the
//!    server sheds past its cap of grabs in flight; the admitted grabs' p99 against
//!    the granted storm's;
//! 5. the sold-out storm: the same shoppers at a sale of few units, most refused from
//!    the server's local sold-out flag;
//! 6. pages: `/` and `/admin` on one kept-alive connection, and `/` at 64 (spread over the processes);
//!
//! then checks the invariants (I1 no oversell, I2 one per user, I3 nothing lost, I4
//! conservation) and prints each figure beside its target. Only a broken invariant
//! fails the run: speed targets are figures to read, not a test.
//!
//! The storms and pages go through a lean client (`lean.rs`) on one thread, as lean as
//! `redis-benchmark`, so the figures are the server's and not the load tool's.
//!
//! `npm run bench` builds the release app and this tool (`.ci/release.sh`), starts the
//! server with Redis and runs this; or run it yourself after that build:
//! `./target/release/bench --help`.

mod lean;

use clap::Parser;
use hyper::{body::Bytes, header::HeaderValue, Method, StatusCode};
use seckill::{
    client::{ApiClient, Shopper},
    testing::{Cost, Hasher, RedisConn, Scripts},
};
use serde_json::Value;
use std::{
    collections::{BTreeMap, HashSet},
    process::ExitCode,
    time::{Duration, Instant},
};

/// Every bench shopper's password.
const PASSWORD: &str = "a bench shopper's password";

#[derive(Parser, Debug)]
#[command(about = "Fire concurrent grabs at a Seckill server, beside the raw gate, and check the invariants")]
struct Args {
    /// Base URL of the server; several, comma-separated, for processes sharing one
    /// sale (grabs go to them in turn).
    #[arg(long, default_value = "http://127.0.0.1:3000")]
    url: String,
    /// Admin token of that server.
    #[arg(long, env = "SECKILL_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: String,
    /// The server's Redis, for the raw gate (skipped when unset or a cluster).
    #[arg(long, env = "REDIS_URL")]
    redis_url: Option<String>,
    /// Process ids of the servers and of Redis, comma-separated, for CPU per grab.
    #[arg(long, default_value = "")]
    server_pids: String,
    #[arg(long, default_value = "")]
    redis_pids: String,
    /// A database server's main process (PostgreSQL's postmaster), whose backends do
    /// the database's work: their CPU per grab is printed too. SQLite's work is the
    /// server's own.
    #[arg(long)]
    db_pid: Option<u32>,
    /// Shoppers to sign in.
    #[arg(long, default_value_t = 10_000)]
    users: usize,
    /// Units on sale in the granted storm (0: as many as shoppers).
    #[arg(long, default_value_t = 0)]
    stock: i64,
    /// Units on sale in the sold-out storm (0: skip it).
    #[arg(long, default_value_t = 100)]
    sold_out_stock: i64,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 256)]
    concurrency: usize,
    /// Gate calls the raw run makes.
    #[arg(long, default_value_t = 100_000)]
    raw_calls: usize,
    /// The servers' database, where the bench puts the accounts whose sign-ins it
    /// times at OWASP's hash cost (skipped when unset).
    #[arg(long)]
    database_url: Option<String>,
    /// Sign-ins running at once beside a storm (enough to keep every hash thread busy
    /// and queue more).
    #[arg(long, default_value_t = 16)]
    sign_in_concurrency: usize,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bench: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<bool, String> {
    let bases: Vec<String> = args.url.split(',').map(|u| u.trim().to_owned()).collect();
    let admin = ApiClient::new(&bases[0], &args.admin_token, args.concurrency);
    let cpu = Cpu::new(&args.server_pids, &args.redis_pids, args.db_pid);
    let started = Instant::now();
    let prefix = format!("b{}", chrono::Utc::now().timestamp_millis());
    let shoppers = admin.shoppers(&prefix, args.users, PASSWORD, args.concurrency).await?;
    println!(
        "signed in {} new shoppers in {:.2?} ({:.0}/s); grabs go to {} process(es) in turn",
        shoppers.len(),
        started.elapsed(),
        shoppers.len() as f64 / started.elapsed().as_secs_f64(),
        bases.len()
    );
    let again = Instant::now();
    let n_again = shoppers.len().min(2_000);
    admin.shoppers(&prefix, n_again, PASSWORD, args.concurrency).await?;
    println!("signed in {n_again} existing names again: {:.0}/s", n_again as f64 / again.elapsed().as_secs_f64());

    let raw = match &args.redis_url {
        Some(url) if !url.contains(',') => Some(raw_gate(url, args.raw_calls).await?),
        _ => None,
    };
    if let Some(raw) = raw {
        println!("raw gate: redis-benchmark EVALSHA lua/grab.lua, c=50, random users: {raw:.0}/s");
    }

    let stock = if args.stock > 0 { args.stock } else { shoppers.len() as i64 };
    let before = cpu.sample();
    let granted = storm(&admin, &bases, args.concurrency, &shoppers, stock, "granted").await?;
    let settled = settle(&admin, granted.voucher_id, granted.last_answer).await?;
    let spent = spent(before, cpu.sample());
    granted.print(raw);
    println!(
        "  all {} orders persisted {:.2?} after the last grab (target ≤ 1 s; {:.0} orders/s from the first grab)",
        settled.stats["persisted"],
        settled.lag,
        settled.stats["persisted"].as_f64().unwrap_or(0.0) / (granted.wall + settled.lag).as_secs_f64()
    );
    let per_grab = |secs: f64| secs * 1e6 / (granted.granted.max(1) as f64);
    if let Some(spent) = spent {
        let db = spent.db.map(|db| format!("; database {:.0} µs", per_grab(db))).unwrap_or_default();
        let redis = spent.redis.max(1e-9);
        // SQLite runs inside the server, where PostgreSQL's CPU is counted apart: show both.
        let (in_sqlite, without_sqlite) = if spent.server_sqlite > 0.0 {
            (
                format!(", {:.0} µs in SQLite's threads", per_grab(spent.server_sqlite)),
                format!(", {:.2} without SQLite's threads", (spent.server - spent.server_sqlite) / redis),
            )
        } else {
            Default::default()
        };
        println!(
            "  CPU per granted grab, persisting included: server {:.0} µs ({:.0} µs in the kernel{in_sqlite}), Redis {:.0} µs (server/Redis {:.2}{without_sqlite}; target ≤ 2){db}; load tool {:.0} µs",
            per_grab(spent.server),
            per_grab(spent.server_kernel),
            per_grab(spent.redis),
            spent.server / redis,
            per_grab(spent.tool)
        );
    }
    if let Some(mb) = cpu.peak_rss_mb() {
        println!("  server peak RSS {mb:.0} MB (target ≤ 150 MB in a 100k-grab storm: --users 100000)");
    }
    let mut ok = check(&granted, &settled.stats, stock, shoppers.len());
    ok &= report_agrees(&admin, &granted).await?;
    ok &= overload(&admin, &bases, &args, &shoppers, &granted).await?;

    if args.sold_out_stock > 0 {
        let sold_out = storm(&admin, &bases, args.concurrency, &shoppers, args.sold_out_stock, "sold-out").await?;
        let settled_sold_out = settle(&admin, sold_out.voucher_id, sold_out.last_answer).await?;
        sold_out.print(raw);
        let locally = refused_locally(&bases, &args.admin_token, sold_out.voucher_id).await?;
        println!("  refused from the local flag: {locally}");
        ok &= check(&sold_out, &settled_sold_out.stats, args.sold_out_stock, shoppers.len());
        ok &= report_agrees(&admin, &sold_out).await?;
    }

    if let Some(database_url) = &args.database_url {
        let accounts = owasp_accounts(database_url, 32).await?;
        let alone = sign_ins(&bases, &accounts, args.sign_in_concurrency, None).await?;
        println!(
            "sign-ins of existing accounts at OWASP's cost (19 MiB, 2 passes): {:.0}/s from {} at once",
            alone.rate, args.sign_in_concurrency
        );
        let (beside, during) = beside_sign_ins(&admin, &bases, &args, &shoppers, &accounts).await?;
        let (p99, alone_p99) = (beside.pct(0.99), granted.pct(0.99));
        println!(
            "granted storm beside sign-ins at their limit: p99 {p99:.2?} vs {alone_p99:.2?} alone = {:.2}× (target ≤ 1.25×); {:.0} sign-ins/s meanwhile",
            p99.as_secs_f64() / alone_p99.as_secs_f64(),
            during.rate
        );
        let settled_beside = settle(&admin, beside.voucher_id, beside.last_answer).await?;
        ok &= check(&beside, &settled_beside.stats, shoppers.len() as i64, shoppers.len());
        ok &= report_agrees(&admin, &beside).await?;
    }

    pages(&bases, &cpu).await?;
    Ok(ok)
}

/// Accounts whose password hash has OWASP's cost, put straight into the database (the
/// servers hash new passwords cheaply for the storm's shoppers: see `.ci/bench`). One
/// hash serves them all: only its cost matters here.
async fn owasp_accounts(database_url: &str, n: usize) -> Result<Vec<String>, String> {
    let hasher = Hasher::new(Cost::OWASP, 1, 1)?;
    let hash = hasher.hash(PASSWORD.to_owned()).await.map_err(|e| e.message)?;
    sqlx::any::install_default_drivers();
    let db = sqlx::AnyPool::connect(database_url).await.map_err(|e| format!("bench database: {e}"))?;
    let prefix = format!("owasp{}", chrono::Utc::now().timestamp_millis());
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    for name in &names {
        sqlx::query("INSERT INTO users (name, password_hash, created_at) VALUES ($1, $2, 0)")
            .bind(name)
            .bind(&hash)
            .execute(&db)
            .await
            .map_err(|e| format!("bench database: {e}"))?;
    }
    db.close().await;
    Ok(names)
}

/// Sign-ins timed: `concurrency` at once over `accounts`, round the processes, until
/// `until` fires (or, without it, three per account).
struct SignIns {
    rate: f64,
}

async fn sign_ins(
    bases: &[String],
    accounts: &[String],
    concurrency: usize,
    until: Option<tokio::sync::watch::Receiver<bool>>,
) -> Result<SignIns, String> {
    let clients: Vec<ApiClient> = bases.iter().map(|b| ApiClient::new(b, "", concurrency)).collect();
    let started = Instant::now();
    let budget = accounts.len() * 3;
    let done = std::sync::atomic::AtomicUsize::new(0);
    let lanes = (0..concurrency).map(|lane| {
        let (clients, done, mut until) = (&clients, &done, until.clone());
        async move {
            for i in (lane..).step_by(concurrency) {
                let stop = match &mut until {
                    Some(rx) => *rx.borrow_and_update(),
                    None => i >= budget,
                };
                if stop {
                    break;
                }
                let name = &accounts[i % accounts.len()];
                clients[i % clients.len()].sign_in(name, PASSWORD).await?;
                done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Ok::<(), String>(())
        }
    });
    futures::future::try_join_all(lanes).await?;
    let n = done.load(std::sync::atomic::Ordering::Relaxed);
    Ok(SignIns { rate: n as f64 / started.elapsed().as_secs_f64() })
}

/// A granted storm on a fresh voucher while sign-ins keep every hash thread busy.
async fn beside_sign_ins(
    admin: &ApiClient,
    bases: &[String],
    args: &Args,
    shoppers: &[Shopper],
    accounts: &[String],
) -> Result<(Storm, SignIns), String> {
    let (stop, until) = tokio::sync::watch::channel(false);
    let signing = sign_ins(bases, accounts, args.sign_in_concurrency, Some(until));
    let storming = async {
        // The sign-ins fill the hash pool first.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let storm = storm(admin, bases, args.concurrency, shoppers, shoppers.len() as i64, "beside sign-ins").await;
        let _ = stop.send(true);
        storm
    };
    let (signed, storm) = tokio::join!(signing, storming);
    Ok((storm?, signed?))
}

/// Grabs refused from the local sold-out flag, summed over the processes: each counts
/// its own.
async fn refused_locally(bases: &[String], admin_token: &str, voucher_id: i64) -> Result<u64, String> {
    let mut total = 0;
    for base in bases {
        let stats = ApiClient::new(base, admin_token, 1).stats(voucher_id).await?;
        total += stats["refused_locally"].as_u64().unwrap_or(0);
    }
    Ok(total)
}

/// One storm: a fresh voucher of `stock` units, one grab per shopper.
struct Storm {
    name: &'static str,
    voucher_id: i64,
    last_answer: Instant,
    wall: Duration,
    latencies: Vec<Duration>,
    /// Of the granted grabs alone (sorted).
    granted_latencies: Vec<Duration>,
    outcomes: BTreeMap<String, usize>,
    granted: usize,
    twice: Vec<i64>,
    /// Calls shed at least once and sent again (the overload storm).
    shed_then_sent_again: usize,
    /// Every 503 answered, those sent again included.
    unavailable_answers: usize,
}

async fn storm(
    admin: &ApiClient,
    bases: &[String],
    concurrency: usize,
    shoppers: &[Shopper],
    stock: i64,
    name: &'static str,
) -> Result<Storm, String> {
    let now = chrono::Utc::now();
    let title = format!("bench {name} {}", now.format("%H:%M:%S"));
    let voucher_id = admin
        .create_voucher(&title, stock, now - chrono::Duration::seconds(1), now + chrono::Duration::hours(1))
        .await?;
    let body = Bytes::from(format!(r#"{{"voucher_id":{voucher_id}}}"#));
    let calls = shoppers
        .iter()
        .map(|s| {
            let cookie = HeaderValue::from_str(&s.cookie).map_err(|e| e.to_string())?;
            Ok(lean::Call { user_id: s.user_id, cookie, body: body.clone() })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let retry_shed = name.starts_with("overload");
    let (answers, first_grab) = lean::storm(bases, concurrency, "/api/grab", &calls, retry_shed).await?;
    let last_answer = Instant::now();
    let mut s = Storm {
        name,
        voucher_id,
        last_answer,
        wall: last_answer - first_grab,
        latencies: Vec::with_capacity(answers.len()),
        granted_latencies: Vec::new(),
        outcomes: BTreeMap::new(),
        granted: 0,
        twice: Vec::new(),
        shed_then_sent_again: 0,
        unavailable_answers: 0,
    };
    let mut winners = HashSet::new();
    for answer in answers {
        s.latencies.push(answer.took);
        s.shed_then_sent_again += usize::from(answer.shed > 0);
        s.unavailable_answers += answer.shed as usize + usize::from(answer.status == StatusCode::SERVICE_UNAVAILABLE);
        let granted = answer.status == StatusCode::OK;
        let outcome = if granted {
            "granted".to_owned()
        } else {
            let body: Value = serde_json::from_slice(&answer.body).unwrap_or_default();
            body["code"].as_str().map_or_else(|| format!("http {}", answer.status), str::to_owned)
        };
        *s.outcomes.entry(outcome).or_default() += 1;
        if granted {
            s.granted += 1;
            s.granted_latencies.push(answer.took);
            if !winners.insert(answer.user_id) {
                s.twice.push(answer.user_id);
            }
        }
    }
    s.latencies.sort();
    s.granted_latencies.sort();
    Ok(s)
}

impl Storm {
    fn pct(&self, p: f64) -> Duration {
        pct(&self.latencies, p)
    }

    fn rate(&self) -> f64 {
        self.latencies.len() as f64 / self.wall.as_secs_f64()
    }

    fn print(&self, raw: Option<f64>) {
        let ratio = raw.map(|r| format!(" = {:.2}× the raw gate", self.rate() / r)).unwrap_or_default();
        println!(
            "{} storm: {} grabs in {:.2?} = {:.0} grabs/s{ratio}; latency p50 {:.2?}, p99 {:.2?} (target ≤ 15 ms), max {:.2?}",
            self.name,
            self.latencies.len(),
            self.wall,
            self.rate(),
            self.pct(0.50),
            self.pct(0.99),
            self.latencies[self.latencies.len() - 1]
        );
        println!("  outcomes: {:?}", self.outcomes);
    }
}

/// The `p` quantile of sorted latencies (zero when there are none).
fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

/// The overload storm: the granted storm's shoppers at a fresh sale of ample stock,
/// over three times as many connections, so three times the grabs the server could
/// answer at once are waiting on it. The server sheds past its cap (503
/// `unavailable`, `Retry-After`) rather than queueing, and a shed shopper comes back
/// after about that second, as the page does: the admitted grabs' p99 is compared
/// with the granted storm's, and every admitted grab must be saved once, none shed
/// counted.
async fn overload(
    admin: &ApiClient,
    bases: &[String],
    args: &Args,
    shoppers: &[Shopper],
    at_1x: &Storm,
) -> Result<bool, String> {
    let storm =
        storm(admin, bases, 3 * args.concurrency, shoppers, shoppers.len() as i64, "overload (3× in flight)").await?;
    let settled = settle(admin, storm.voucher_id, storm.last_answer).await?;
    let (p99, p99_1x) = (pct(&storm.granted_latencies, 0.99), pct(&at_1x.granted_latencies, 0.99));
    let shed = storm.outcomes.get("unavailable").copied().unwrap_or(0);
    println!(
        "overload storm: {} shoppers over {} connections in {:.2?}: {} granted, {} shed and back after a second, {shed} shed {} times; admitted p99 {p99:.2?} vs {p99_1x:.2?} at 1× = {:.2}× (target ≤ 2×)",
        storm.latencies.len(),
        3 * args.concurrency,
        storm.wall,
        storm.granted,
        storm.shed_then_sent_again,
        lean::SHED_RETRIES + 1,
        p99.as_secs_f64() / p99_1x.as_secs_f64().max(1e-9)
    );
    println!("  outcomes: {:?}", storm.outcomes);
    let n = |k: &str| settled.stats[k].as_i64().unwrap_or(-1);
    let checks = [
        ("every admitted grab saved once", storm.twice.is_empty() && n("persisted") == storm.granted as i64),
        ("no shed grab granted", n("granted") == storm.granted as i64),
        ("redis stock + granted = total", n("redis_stock") + n("granted") == n("total_stock")),
        ("every grab answered granted or shed", storm.granted + shed == storm.latencies.len()),
    ];
    let mut ok = true;
    for (name, held) in checks {
        if !held {
            println!("  FAIL {name} (overload storm): {} {:?}", settled.stats, storm.outcomes);
        }
        ok &= held;
    }
    if ok {
        println!("  invariants hold: admitted grabs saved once, shed grabs not granted");
    }
    Ok(ok && report_agrees(admin, &storm).await?)
}

/// Whether the sale's report (`sale_report`) counts every answer the storm received:
/// each outcome as many times, and the 503s (shed, or the gate unavailable) with those
/// sent again. Other processes add their counts within a second: asked until it holds,
/// for a few seconds.
async fn report_agrees(admin: &ApiClient, storm: &Storm) -> Result<bool, String> {
    let mut expected: BTreeMap<String, i64> =
        storm.outcomes.iter().filter(|(k, _)| *k != "unavailable").map(|(k, n)| (k.clone(), *n as i64)).collect();
    if storm.unavailable_answers > 0 {
        expected.insert("unavailable or shed".into(), storm.unavailable_answers as i64);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let report = admin.admin("sale_report", serde_json::json!({ "voucher_id": storm.voucher_id })).await?;
        let mut said: BTreeMap<String, i64> = BTreeMap::new();
        for (outcome, n) in report["answers"].as_object().into_iter().flatten() {
            let n = n.as_i64().unwrap_or(-1);
            let key = if outcome == "shed" || outcome == "unavailable" { "unavailable or shed" } else { outcome };
            if n != 0 {
                *said.entry(key.to_owned()).or_default() += n;
            }
        }
        if said == expected {
            println!("  the sale's report counts every answer: {said:?}");
            return Ok(true);
        }
        if Instant::now() > deadline {
            println!("  FAIL the sale's report ({} storm): {said:?}, the storm received {expected:?}", storm.name);
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The voucher's figures once every granted order is persisted, and how long after
/// the storm's last answer that was.
struct Settled {
    stats: Value,
    lag: Duration,
}

async fn settle(admin: &ApiClient, voucher_id: i64, last_answer: Instant) -> Result<Settled, String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = admin.stats(voucher_id).await?;
        if s["persisted"] == s["granted"] && s["pending"] == 0 {
            return Ok(Settled { stats: s, lag: last_answer.elapsed() });
        }
        if Instant::now() > deadline {
            return Err(format!("VIOLATION I3: orders still not persisted after 120 s: {s}"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The invariants after one storm.
fn check(storm: &Storm, stats: &Value, stock: i64, users: usize) -> bool {
    let n = |k: &str| stats[k].as_i64().unwrap_or(-1);
    let expected = stock.min(users as i64);
    let checks = [
        ("I1 granted = min(stock, users)", storm.granted as i64 == expected && n("granted") == expected),
        ("I1 persisted <= stock, redis stock >= 0", n("persisted") <= stock && n("redis_stock") >= 0),
        ("I2 one order per user", storm.twice.is_empty() && storm.granted as i64 == n("persisted")),
        ("I3 nothing lost, nothing dead", n("persisted") == n("granted") && n("dead_letters") == 0),
        ("I4 redis stock + granted = total", n("redis_stock") + n("granted") == n("total_stock")),
    ];
    let mut ok = true;
    for (name, held) in checks {
        if !held {
            println!("  FAIL {name} ({} storm): {stats}", storm.name);
        }
        ok &= held;
    }
    if ok {
        println!("  invariants I1–I4 hold");
    }
    ok
}

/// Grabs per second Redis alone decides: `redis-benchmark` running the gate script by
/// EVALSHA with random users, on keys of the bench's own (removed after).
async fn raw_gate(redis_url: &str, calls: usize) -> Result<f64, String> {
    let mut redis = RedisConn::open(redis_url).await.map_err(|e| format!("raw gate: {e}"))?;
    let script = Scripts::default().grab;
    let sha = script.prepare_invoke().load_async(&mut redis).await.map_err(|e| format!("raw gate: {e}"))?;
    let base = format!("benchraw{}:{{v1}}", rand::random::<u32>());
    let keys: Vec<String> =
        ["stock", "buyers", "window", "orders", "results", "refused"].iter().map(|k| format!("{base}:{k}")).collect();
    let () = redis::pipe()
        .set(&keys[0], 1_000_000_000)
        .ignore()
        .hset_multiple(&keys[2], &[("begins", 0_i64), ("ends", 4_102_444_800_000), ("expires", 4_102_444_800_000)])
        .ignore()
        .query_async(&mut redis)
        .await
        .map_err(|e| format!("raw gate: {e}"))?;
    let url = redis::IntoConnectionInfo::into_connection_info(redis_url).map_err(|e| e.to_string())?;
    let (host, port) = match url.addr {
        redis::ConnectionAddr::Tcp(host, port) => (host, port),
        other => return Err(format!("raw gate: {other:?} is not a TCP address")),
    };
    let out = tokio::process::Command::new("redis-benchmark")
        .args(["-h", &host, "-p", &port.to_string(), "-c", "50", "-n", &calls.to_string(), "-r", "1000000000"])
        .args(["--csv", "EVALSHA", &sha, "6"])
        .args(&keys)
        .args(["__rand_int__", "__rand_int__", "1", &format!("{base}:events"), "q", "s"])
        .output()
        .await
        .map_err(|e| format!("raw gate: running redis-benchmark: {e}"))?;
    let _: redis::RedisResult<()> = redis::cmd("DEL").arg(&keys).query_async(&mut redis).await;
    let csv = String::from_utf8_lossy(&out.stdout);
    let rps = csv.lines().nth(1).and_then(|l| l.split("\",\"").nth(1)).and_then(|r| r.trim_matches('"').parse().ok());
    rps.ok_or_else(|| format!("raw gate: no figure in redis-benchmark's output: {csv}"))
}

/// Page figures: mean time of `/` and `/admin` on one kept-alive connection, and `/`
/// pages per second at 64 connections, spread over the processes (as a balancer would).
async fn pages(bases: &[String], cpu: &Cpu) -> Result<(), String> {
    for path in ["/", "/admin"] {
        let mut one = lean::Conn::open(&bases[0]).await?;
        let n = 100;
        let mut started = Instant::now();
        for i in 0..=n {
            let (status, _) = one.send(Method::GET, path, None, None).await?;
            if status != StatusCode::OK {
                return Err(format!("{path} answered {status}"));
            }
            if i == 0 {
                started = Instant::now(); // the first page warms the connection
            }
        }
        println!(
            "page {path} on one kept-alive connection: {:.2} ms per page (target ≤ 2 ms)",
            started.elapsed().as_secs_f64() * 1000.0 / n as f64
        );
    }
    let before = cpu.sample();
    let (served, took) = lean::pages(bases, 64, "/", Duration::from_secs(3)).await?;
    let per_page = spent(before, cpu.sample())
        .map(|s| format!("; server CPU {:.0} µs per page", s.server * 1e6 / served.max(1) as f64))
        .unwrap_or_default();
    println!("page / at 64 connections: {:.0} pages/s (target ≥ 5,000){per_page}", served as f64 / took.as_secs_f64());
    Ok(())
}

/// CPU time of the server processes and of Redis, from `/proc/<pid>/stat`, and the
/// servers' peak memory.
struct Cpu {
    servers: Vec<u32>,
    redis: Vec<u32>,
    db: Option<u32>,
}

struct CpuSample {
    server: f64,
    /// The part of `server` spent in the kernel (sockets, mostly).
    server_kernel: f64,
    /// The part of `server` spent in SQLite's threads (sqlx runs each SQLite
    /// connection on a thread of its own); zero on PostgreSQL.
    server_sqlite: f64,
    redis: f64,
    /// The database server's processes, when it runs apart (PostgreSQL).
    db: Option<f64>,
    /// This load tool, to show how much of the machine it took.
    tool: f64,
}

impl Cpu {
    fn new(servers: &str, redis: &str, db: Option<u32>) -> Self {
        let pids = |s: &str| s.split(',').filter_map(|p| p.trim().parse().ok()).collect();
        Self { servers: pids(servers), redis: pids(redis), db }
    }

    /// The largest peak resident set of the server processes so far (`VmHWM`), in MB.
    fn peak_rss_mb(&self) -> Option<f64> {
        let peak = |pid: &u32| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<f64>().ok()
        };
        let kib = self.servers.iter().map(peak).collect::<Option<Vec<f64>>>()?;
        kib.into_iter().reduce(f64::max).map(|k| k / 1024.0)
    }

    fn sample(&self) -> Option<CpuSample> {
        if self.servers.is_empty() || self.redis.is_empty() {
            return None;
        }
        let total = |pids: &[u32]| {
            let times = pids.iter().map(|&p| cpu_seconds(p)).collect::<Option<Vec<_>>>()?;
            Some(times.into_iter().fold((0.0, 0.0), |(u, k), t| (u + t.0, k + t.1)))
        };
        let (user, kernel) = total(&self.servers)?;
        let redis = total(&self.redis)?;
        let tool = cpu_seconds(std::process::id())?;
        Some(CpuSample {
            server: user + kernel,
            server_kernel: kernel,
            server_sqlite: self.servers.iter().map(|&p| sqlite_thread_seconds(p)).sum(),
            redis: redis.0 + redis.1,
            db: self.db.and_then(tree_cpu_seconds),
            tool: tool.0 + tool.1,
        })
    }
}

/// CPU seconds of a process and its children: the live ones (PostgreSQL's backends)
/// and those it has reaped.
fn tree_cpu_seconds(pid: u32) -> Option<f64> {
    let own: f64 = cpu_times(pid)?.iter().sum();
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    let live: f64 = children.split_whitespace().filter_map(|c| cpu_seconds(c.parse().ok()?)).map(|(u, k)| u + k).sum();
    Some(own + live)
}

/// CPU seconds spent between two samples.
fn spent(before: Option<CpuSample>, after: Option<CpuSample>) -> Option<CpuSample> {
    let (b, a) = (before?, after?);
    Some(CpuSample {
        server: a.server - b.server,
        server_kernel: a.server_kernel - b.server_kernel,
        // A connection closed in between takes its thread's time with it: never below zero.
        server_sqlite: (a.server_sqlite - b.server_sqlite).max(0.0),
        redis: a.redis - b.redis,
        db: a.db.zip(b.db).map(|(a, b)| a - b),
        tool: a.tool - b.tool,
    })
}

/// CPU seconds of a server's SQLite threads, found by the name sqlx gives them
/// (`sqlx-sqlite-worker-<n>`, cut to 15 bytes by the kernel).
fn sqlite_thread_seconds(pid: u32) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0.0 };
    let seconds = |tid: &str| {
        let name = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
        if !name.starts_with("sqlx-sqlite-wor") {
            return None;
        }
        let [user, system, ..] = cpu_times_at(&format!("/proc/{pid}/task/{tid}/stat"))?;
        Some(user + system)
    };
    tasks.filter_map(|t| seconds(t.ok()?.file_name().to_str()?)).sum()
}

/// User and system CPU seconds of a process.
fn cpu_seconds(pid: u32) -> Option<(f64, f64)> {
    let [user, system, ..] = cpu_times(pid)?;
    Some((user, system))
}

/// A process's user and system CPU seconds, then those of the children it has reaped
/// (fields 14 to 17 of its `stat`, in clock ticks of 1/100 s, Linux's USER_HZ).
fn cpu_times(pid: u32) -> Option<[f64; 4]> {
    cpu_times_at(&format!("/proc/{pid}/stat"))
}

/// The same four figures from a `stat` file (a process's or one thread's).
fn cpu_times_at(path: &str) -> Option<[f64; 4]> {
    let stat = std::fs::read_to_string(path).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let seconds = |i: usize| Some(fields.get(i)?.parse::<f64>().ok()? / 100.0);
    Some([seconds(11)?, seconds(12)?, seconds(13)?, seconds(14)?])
}
