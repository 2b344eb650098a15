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

mod cpu;
mod lean;
mod pages;
mod raw_gate;
mod sign_ins;
mod storm;

use cpu::{spent, Cpu};
use pages::pages;
use raw_gate::raw_gate;
use sign_ins::{beside_sign_ins, owasp_accounts, sign_ins};
use storm::{check, overload, refused_locally, report_agrees, settle, storm, storm_in_shards, Storm};

use clap::Parser;
use seckill::client::ApiClient;
use std::{process::ExitCode, time::Instant};

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
    /// Shards of the granted storm's sale, comma-separated: one granted storm for each
    /// (on a Redis Cluster, `BENCH_REDIS=cluster`, Redis's CPU is printed per master).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    shards: Vec<u32>,
    /// Units on sale in the granted storm (0: as many as shoppers).
    #[arg(long, default_value_t = 0)]
    stock: i64,
    /// Units on sale in the sold-out storm (0: skip it).
    #[arg(long, default_value_t = 100)]
    sold_out_stock: i64,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 256)]
    concurrency: usize,
    /// Threads the storms' client runs on, the connections shared out over them: one
    /// thread's client tops out below what a many-core server answers.
    #[arg(long, default_value_t = 1)]
    load_threads: usize,
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
    lean::set_threads(args.load_threads);
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
    let (mut ok, mut first, mut per_grant) = (true, None, Vec::new());
    for &shards in &args.shards {
        let (granted, stats, server_us) =
            granted_storm(&admin, (&bases, &args, &cpu), &shoppers, (stock, shards), raw).await?;
        ok &= check(&granted, &stats, stock, shoppers.len());
        // The overload storm and the report are set against the first.
        first.get_or_insert(granted);
        per_grant.extend(server_us.map(|us| (shards, us)));
    }
    let Some(granted) = first else { return Err("--shards names no count".into()) };
    if let Some(mb) = cpu.peak_rss_mb() {
        println!("  server peak RSS {mb:.0} MB (target ≤ 150 MB in a 100k-grab storm: --users 100000)");
    }
    ok &= report_agrees(&admin, &granted).await?;
    ok &= overload(&admin, &bases, &args, &shoppers, &granted).await?;

    if args.sold_out_stock > 0 {
        let before = cpu.sample();
        let sold_out = storm(&admin, &bases, args.concurrency, &shoppers, args.sold_out_stock, "sold-out").await?;
        let settled_sold_out = settle(&admin, sold_out.voucher_id, sold_out.last_answer).await?;
        let spent = spent(before, cpu.sample());
        sold_out.print(raw);
        if let Some(spent) = spent {
            let answers = sold_out.latencies.len().max(1) as f64;
            println!(
                "  CPU per answer, persisting included: server {:.1} µs, Redis {:.1} µs",
                spent.server * 1e6 / answers,
                spent.redis * 1e6 / answers
            );
        }
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

    let per_page = pages(&bases, &cpu).await?;
    // Each granted storm's CPU per grab against the page's (K = 1 and 3: `--shards 1,3`).
    if let Some(page) = per_page {
        for (shards, grant) in &per_grant {
            println!(
                "server CPU per granted grab / per cached shop page, {shards} shard(s): {grant:.0} / {page:.0} µs = {:.2}× (target ≤ 1×)",
                grant / page
            );
        }
    }
    Ok(ok)
}

/// One granted storm at a sale of `shards`: its figures printed, with the CPU per
/// granted grab of the server and of Redis (each Redis process apart when there are
/// several: the masters of a cluster, each deciding its buckets). Returns the storm,
/// the sale's figures once every order is saved, and the server's CPU per granted
/// grab in µs (when the processes' CPU can be read).
async fn granted_storm(
    admin: &ApiClient,
    (bases, args, cpu): (&[String], &Args, &Cpu),
    shoppers: &[seckill::client::Shopper],
    (stock, shards): (i64, u32),
    raw: Option<f64>,
) -> Result<(Storm, serde_json::Value, Option<f64>), String> {
    println!("granted storm at a sale of {shards} shard(s):");
    let before = cpu.sample();
    let granted = storm_in_shards(admin, (bases, args.concurrency), shoppers, (stock, shards), "granted").await?;
    let settled = settle(admin, granted.voucher_id, granted.last_answer).await?;
    let spent = spent(before, cpu.sample());
    granted.print(raw);
    println!(
        "  all {} orders persisted {:.2?} after the last grab (target ≤ 1 s; {:.0} orders/s from the first grab)",
        settled.stats["persisted"],
        settled.lag,
        settled.stats["persisted"].as_f64().unwrap_or(0.0) / (granted.wall + settled.lag).as_secs_f64()
    );
    let per_grab = |secs: f64| secs * 1e6 / (granted.granted.max(1) as f64);
    if let Some(spent) = &spent {
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
            "  CPU per granted grab, persisting included: server {:.0} µs ({:.0} µs in the kernel{in_sqlite}), Redis {:.1} µs (server/Redis {:.2}{without_sqlite}){db}; load tool {:.0} µs",
            per_grab(spent.server),
            per_grab(spent.server_kernel),
            per_grab(spent.redis),
            spent.server / redis,
            per_grab(spent.tool)
        );
        if spent.redis_each.len() > 1 {
            let each: Vec<String> = spent.redis_each.iter().map(|s| format!("{:.1}", per_grab(*s))).collect();
            println!(
                "  Redis µs per granted grab, each process: {} (total {:.1})",
                each.join(" · "),
                per_grab(spent.redis)
            );
        }
    }
    let server_us = spent.map(|s| per_grab(s.server));
    Ok((granted, settled.stats, server_us))
}
