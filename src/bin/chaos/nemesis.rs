//! The nemesis: faults on a schedule drawn from the seed (so a run can be replayed),
//! each held for a while and healed, overlapping as they fall. One fault at a time
//! per target: a fault whose target is still under another is skipped.

use crate::{
    history::{Fault, FaultKind, History},
    topology::OneBox,
};
use rand::{rngs::StdRng, Rng};
use std::{sync::Arc, time::Duration};
use tokio::sync::Mutex;

/// Tries at starting a process again before the run is given up as broken.
const RESTART_TRIES: usize = 10;

/// One fault of the schedule.
#[derive(Clone, Debug)]
pub struct Planned {
    /// When it starts (ms since the run's start).
    pub at: u64,
    pub kind: FaultKind,
    /// The app process it hits (kill, pause).
    pub app: usize,
    /// How long it holds (ms).
    pub hold: u64,
}

/// The schedule: a fault every 2 to 8 s from the third second to 5 s before the end.
pub fn plan(rng: &mut StdRng, run_ms: u64, apps: usize, claim_idle_ms: u64, pay_timeout_ms: u64) -> Vec<Planned> {
    let mut faults = Vec::new();
    let mut at = 3_000;
    while at + 5_000 < run_ms {
        let kind = match rng.random_range(0..20) {
            0..5 => FaultKind::Kill,
            5..9 => FaultKind::Pause,
            9..12 => FaultKind::RedisRestart,
            12..17 => FaultKind::DbStall,
            _ => FaultKind::PubSubCut,
        };
        let hold = match kind {
            FaultKind::Kill => rng.random_range(500..3_000),
            // Past the claim time: the others take over what it holds.
            FaultKind::Pause => claim_idle_ms + rng.random_range(500..3_000),
            FaultKind::RedisRestart => rng.random_range(300..3_000),
            // Sometimes past the time to pay: orders saved after it keep theirs.
            FaultKind::DbStall => rng.random_range(1_000..pay_timeout_ms + 3_000),
            FaultKind::PubSubCut => 0,
        };
        faults.push(Planned { at, kind, app: rng.random_range(0..apps), hold });
        at += rng.random_range(2_000..8_000);
    }
    faults
}

/// Runs the schedule on `topology`; returns once every fault is healed.
pub async fn run(topology: Arc<OneBox>, history: Arc<History>, schedule: Vec<Planned>) {
    let locks = Arc::new(Locks::default());
    let mut injected = Vec::new();
    for planned in schedule {
        let wait = planned.at.saturating_sub(history.now());
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let (topology, history, locks) = (topology.clone(), history.clone(), locks.clone());
        injected.push(tokio::spawn(async move { inject(&topology, &history, &locks, planned).await }));
    }
    for fault in injected {
        let _ = fault.await;
    }
}

/// Targets other than the app processes (each app has its own lock in the topology).
#[derive(Default)]
struct Locks {
    redis: Mutex<()>,
    db: Mutex<()>,
}

async fn inject(topology: &OneBox, history: &History, locks: &Locks, p: Planned) {
    let hold = Duration::from_millis(p.hold);
    let start = history.now();
    let target = match p.kind {
        FaultKind::Kill | FaultKind::Pause => {
            let Ok(mut app) = topology.apps[p.app].try_lock() else { return };
            if p.kind == FaultKind::Kill {
                topology.kill(&mut app).await;
                tokio::time::sleep(hold).await;
                let mut tries = 0;
                while let Err(e) = topology.start_app(&mut app).await {
                    tries += 1;
                    eprintln!("chaos: starting {} again: {e}; trying again", app.name());
                    topology.kill(&mut app).await;
                    if tries == RESTART_TRIES {
                        history.broken(format!("{} did not start again in {tries} tries: {e}", app.name()));
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            } else {
                app.signal(libc::SIGSTOP);
                tokio::time::sleep(hold).await;
                app.signal(libc::SIGCONT);
            }
            app.name()
        }
        FaultKind::RedisRestart => {
            let Ok(_redis) = locks.redis.try_lock() else { return };
            topology.crash_redis().await;
            tokio::time::sleep(hold).await;
            let mut tries = 0;
            while let Err(e) = topology.start_redis().await {
                tries += 1;
                eprintln!("chaos: starting Redis again: {e}; trying again");
                if tries == RESTART_TRIES {
                    history.broken(format!("Redis did not start again in {tries} tries: {e}"));
                    break;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            "redis".to_owned()
        }
        FaultKind::DbStall => {
            let Ok(_db) = locks.db.try_lock() else { return };
            if let Err(e) = hold_write_lock(&topology.database_url, hold).await {
                eprintln!("chaos: the database stall did not start: {e}");
                return;
            }
            "db".to_owned()
        }
        FaultKind::PubSubCut => {
            let Ok(_redis) = locks.redis.try_lock() else { return };
            let cut = async {
                let mut redis = seckill::testing::RedisConn::open(&topology.redis_url).await?;
                redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub").query_async::<i64>(&mut redis).await
            };
            if tokio::time::timeout(Duration::from_secs(2), cut).await.is_err() {
                return;
            }
            "redis".to_owned()
        }
    };
    history.fault(Fault { kind: p.kind, target, start, end: history.now() });
}

/// Holds the database's write lock (SQLite's `BEGIN IMMEDIATE`) for `hold`.
async fn hold_write_lock(url: &str, hold: Duration) -> Result<(), sqlx::Error> {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let mut writer = sqlx::AnyConnection::connect(url).await?;
    sqlx::query("BEGIN IMMEDIATE").execute(&mut writer).await?;
    tokio::time::sleep(hold).await;
    sqlx::query("ROLLBACK").execute(&mut writer).await?;
    Ok(())
}
