//! Load tool: fires concurrent grabs from many signed-in shoppers at a running
//! server through the JSON API, prints throughput and latency, then checks the
//! invariants (I1 no oversell, I2 one per user, I3 nothing lost, I4 conservation).
//!
//! `npm run bench` builds a release server, starts it with Redis and runs this;
//! or run it yourself: `cargo run --release --features ssr --bin bench -- --help`.

use clap::Parser;
use futures::{stream, StreamExt};
use seckill::client::{ApiClient, Shopper};
use serde_json::Value;
use std::{
    collections::{BTreeMap, HashSet},
    process::ExitCode,
    time::{Duration, Instant},
};

#[derive(Parser, Debug)]
#[command(about = "Fire concurrent grabs at a Seckill server and check the invariants")]
struct Args {
    /// Base URL of the server; several, comma-separated, for processes sharing one
    /// sale (grabs go to them in turn).
    #[arg(long, default_value = "http://127.0.0.1:3000")]
    url: String,
    /// Admin token of that server.
    #[arg(long, env = "SECKILL_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: String,
    /// Shoppers to sign in.
    #[arg(long, default_value_t = 2_000)]
    users: usize,
    /// Grabs each shopper fires (the extra ones must be refused).
    #[arg(long, default_value_t = 2)]
    grabs_per_user: usize,
    /// Units on sale.
    #[arg(long, default_value_t = 500)]
    stock: i64,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 256)]
    concurrency: usize,
}

#[tokio::main]
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
    let servers: Vec<ApiClient> =
        args.url.split(',').map(|u| ApiClient::new(u.trim(), &args.admin_token, args.concurrency)).collect();
    let client = servers[0].clone();
    let now = chrono::Utc::now();
    let title = format!("bench {}", now.format("%H:%M:%S"));
    let voucher_id = client
        .create_voucher(&title, args.stock, now - chrono::Duration::seconds(1), now + chrono::Duration::hours(1))
        .await?;

    let started = Instant::now();
    let shoppers = client.sign_in_many(&format!("b{}", now.timestamp_millis()), args.users, args.concurrency).await?;
    println!("signed in {} shoppers in {:.2?}", shoppers.len(), started.elapsed());
    println!("grabs go to {} process(es) in turn", servers.len());

    let grabs: Vec<(usize, &Shopper)> = (0..args.grabs_per_user).flat_map(|_| shoppers.iter()).enumerate().collect();
    let first_grab = Instant::now();
    let started = first_grab;
    let answers: Vec<Result<(i64, u16, Value, Duration), String>> = stream::iter(grabs)
        .map(|(i, shopper)| {
            let client = &servers[i % servers.len()];
            async move {
                let t = Instant::now();
                let (status, body) = client.grab(shopper, voucher_id).await?;
                Ok((shopper.user_id, status.as_u16(), body, t.elapsed()))
            }
        })
        .buffer_unordered(args.concurrency)
        .collect()
        .await;
    let wall = started.elapsed();

    let mut latencies = Vec::with_capacity(answers.len());
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut winners = HashSet::new();
    let mut ok = true;
    for answer in answers {
        let (user, status, body, took) = answer?;
        latencies.push(took);
        let outcome =
            if status == 200 { "granted".to_owned() } else { body["code"].as_str().unwrap_or("?").to_owned() };
        *outcomes.entry(outcome).or_default() += 1;
        if status == 200 && !winners.insert(user) {
            println!("VIOLATION I2: user {user} granted twice");
            ok = false;
        }
    }
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    println!(
        "grabs: {} in {:.2?} = {:.0} grabs/s; latency p50 {:.2?}, p99 {:.2?}, max {:.2?}",
        latencies.len(),
        wall,
        latencies.len() as f64 / wall.as_secs_f64(),
        pct(0.50),
        pct(0.99),
        latencies[latencies.len() - 1]
    );
    println!("outcomes: {outcomes:?}");

    // Wait for the worker to persist every granted order.
    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    let stats = loop {
        let s = client.stats(voucher_id).await?;
        if s["persisted"] == s["granted"] && s["pending"] == 0 {
            break s;
        }
        if Instant::now() > deadline {
            println!("VIOLATION I3: orders still not persisted after 120 s: {s}");
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    println!(
        "all {} orders persisted {:.2?} after the last grab ({:.0} orders/s from the first grab)",
        stats["persisted"],
        started.elapsed(),
        stats["persisted"].as_f64().unwrap_or(0.0) / first_grab.elapsed().as_secs_f64()
    );
    println!("stats: {stats}");

    let n = |k: &str| stats[k].as_i64().unwrap_or(-1);
    let expected = args.stock.min(args.users as i64);
    let checks = [
        ("I1 granted = min(stock, users)", winners.len() as i64 == expected && n("granted") == expected),
        ("I1 persisted <= stock, redis stock >= 0", n("persisted") <= args.stock && n("redis_stock") >= 0),
        ("I2 one order per user", winners.len() as i64 == n("persisted")),
        ("I3 nothing lost, nothing dead", n("persisted") == n("granted") && n("dead_letters") == 0),
        ("I4 redis stock + granted = total", n("redis_stock") + n("granted") == n("total_stock")),
    ];
    for (name, held) in checks {
        println!("{} {name}", if held { "ok  " } else { "FAIL" });
        ok &= held;
    }
    Ok(ok)
}
