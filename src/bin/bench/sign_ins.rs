//! Sign-ins as a load: accounts at OWASP's hashing cost, sign-ins timed, and a
//! granted storm while they keep every hash thread busy.

use crate::{
    storm::{storm, Storm},
    Args, PASSWORD,
};
use seckill::{
    client::{ApiClient, Shopper},
    testing::{Cost, Hasher},
};
use std::time::{Duration, Instant};

/// Accounts whose password hash has OWASP's cost, put straight into the database (the
/// servers hash new passwords cheaply for the storm's shoppers: see `.ci/bench`). One
/// hash serves them all: only its cost matters here.
pub(crate) async fn owasp_accounts(database_url: &str, n: usize) -> Result<Vec<String>, String> {
    let hasher = Hasher::new(Cost::OWASP, 1, 1)?;
    let hash = hasher.hash(PASSWORD.to_owned()).await.map_err(|e| e.message)?;
    sqlx::any::install_default_drivers();
    let db = sqlx::AnyPool::connect(database_url).await.map_err(|e| format!("bench database: {e}"))?;
    let prefix = format!("owasp{}", chrono::Utc::now().timestamp_millis());
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    for name in &names {
        // Keyed as a sign-up keys them: the servers have none to key in the storm.
        let keys = seckill::testing::Keys::of(name);
        let insert =
            "INSERT INTO users (name, name_key, name_shape, password_hash, created_at) VALUES ($1, $2, $3, $4, 0)";
        sqlx::query(insert)
            .bind(name)
            .bind(keys.case)
            .bind(keys.shape)
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
pub(crate) struct SignIns {
    pub(crate) rate: f64,
}

pub(crate) async fn sign_ins(
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
pub(crate) async fn beside_sign_ins(
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
