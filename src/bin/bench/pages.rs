//! Page figures: the shop and admin pages served to one kept-alive connection, and
//! the shop page to many.

use crate::{
    cpu::{spent, Cpu},
    lean,
};
use hyper::{Method, StatusCode};
use std::time::{Duration, Instant};

/// Page figures: mean time of `/` and `/admin` on one kept-alive connection, and `/`
/// pages per second at 64 connections, spread over the processes (as a balancer would).
/// Returns the server's CPU per page at 64 in µs (when the processes' CPU can be read).
pub(crate) async fn pages(bases: &[String], cpu: &Cpu) -> Result<Option<f64>, String> {
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
    let per_page = spent(before, cpu.sample()).map(|s| s.server * 1e6 / served.max(1) as f64);
    let cost = per_page.map(|us| format!("; server CPU {us:.0} µs per page")).unwrap_or_default();
    let rate = served as f64 / took.as_secs_f64();
    println!("page / at 64 connections: {rate:.0} pages/s (target ≥ 5,000; {served} pages){cost}");
    Ok(per_page)
}
