//! Load tool: fires concurrent grabs from many signed-in shoppers at a running
//! server through the JSON API, prints throughput and latency, then checks the
//! invariants (I1 no oversell, I2 one per user, I3 nothing lost, I4 conservation).
//!
//! `npm run bench` builds a release server, starts it with Redis and runs this;
//! or run it yourself: `cargo run --release --features ssr --bin bench -- --help`.

use clap::Parser;
use futures::{stream, StreamExt};
use serde_json::{json, Value};
use std::{
    collections::{BTreeMap, HashSet},
    process::ExitCode,
    time::{Duration, Instant},
};

#[derive(Parser, Debug)]
#[command(about = "Fire concurrent grabs at a Seckill server and check the invariants")]
struct Args {
    /// Base URL of the server.
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

struct Client {
    http: reqwest::Client,
    url: String,
    admin: String,
}

impl Client {
    async fn post(&self, name: &str, body: Value, headers: &[(&str, &str)]) -> Result<(u16, Value), String> {
        let mut req = self.http.post(format!("{}/api/{name}", self.url)).json(&body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let res = req.send().await.map_err(|e| format!("{name}: {e}"))?;
        let status = res.status().as_u16();
        let body = res.json().await.unwrap_or(Value::Null);
        Ok((status, body))
    }

    async fn admin(&self, name: &str, body: Value) -> Result<Value, String> {
        let auth = format!("Bearer {}", self.admin);
        let (status, body) = self.post(name, body, &[("authorization", &auth)]).await?;
        if status == 200 {
            Ok(body)
        } else {
            Err(format!("{name}: {status} {body}"))
        }
    }

    /// Signs in and returns (user id, cookie).
    async fn sign_in(&self, name: String) -> Result<(i64, String), String> {
        let res = self.http.post(format!("{}/api/sign_in", self.url)).json(&json!({ "name": name })).send().await;
        let res = res.map_err(|e| format!("sign_in: {e}"))?;
        let cookie = res
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .ok_or("sign_in: no session cookie")?
            .to_owned();
        let body: Value = res.json().await.map_err(|e| format!("sign_in: {e}"))?;
        Ok((body["user_id"].as_i64().ok_or("sign_in: no user_id")?, cookie))
    }
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
    let http =
        reqwest::Client::builder().pool_max_idle_per_host(args.concurrency).build().map_err(|e| e.to_string())?;
    let client = Client { http, url: args.url.trim_end_matches('/').to_owned(), admin: args.admin_token.clone() };
    let now = chrono::Utc::now();
    let voucher = client
        .admin(
            "create_voucher",
            json!({
                "title": format!("bench {}", now.format("%H:%M:%S")),
                "stock": args.stock,
                "begins_at": (now - chrono::Duration::seconds(1)).to_rfc3339(),
                "ends_at": (now + chrono::Duration::hours(1)).to_rfc3339(),
            }),
        )
        .await?;
    let voucher_id = voucher["id"].as_i64().ok_or("create_voucher: no id")?;

    let run_id = now.timestamp_millis();
    let started = Instant::now();
    let shoppers: Vec<(i64, String)> = stream::iter(0..args.users)
        .map(|i| client.sign_in(format!("b{run_id}-{i}")))
        .buffer_unordered(args.concurrency)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    println!("signed in {} shoppers in {:.2?}", shoppers.len(), started.elapsed());

    let grabs: Vec<&(i64, String)> = (0..args.grabs_per_user).flat_map(|_| shoppers.iter()).collect();
    let first_grab = Instant::now();
    let started = first_grab;
    let answers: Vec<Result<(i64, u16, Value, Duration), String>> = stream::iter(grabs)
        .map(|(user, cookie)| {
            let client = &client;
            async move {
                let t = Instant::now();
                let (status, body) =
                    client.post("grab", json!({ "voucher_id": voucher_id }), &[("cookie", cookie)]).await?;
                Ok((*user, status, body, t.elapsed()))
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
        let s = client.admin("sale_stats", json!({ "voucher_id": voucher_id })).await?;
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
