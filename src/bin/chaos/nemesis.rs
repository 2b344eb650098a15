//! The nemesis: faults on a schedule drawn from the seed (so a run can be replayed),
//! each held for a while and healed, overlapping as they fall. One fault at a time
//! per target: a fault whose target is still under another is skipped.

use crate::{
    history::{EvictingStart, Fault, FaultKind, History},
    proxy::Mode,
    topology::{App, Kind, Topology},
};
use rand::{rngs::StdRng, Rng};
use std::{collections::HashSet, sync::Arc, time::Duration};
use tokio::sync::Mutex;

/// Tries at starting a process again before the run is given up as broken.
const RESTART_TRIES: usize = 10;

/// One fault of the schedule.
#[derive(Clone, Debug)]
pub struct Planned {
    /// When it starts (ms since the run's start).
    pub at: u64,
    pub kind: FaultKind,
    /// What it hits: the app process (kill, pause) or the master (by index, modulo
    /// how many there are); for a clock offset, the app and the offset together.
    pub app: usize,
    /// How long it holds (ms).
    pub hold: u64,
    /// What else the fault needs (a link's delay, share or rate), drawn with it.
    pub detail: u64,
}

/// The schedule: a fault every 2 to 8 s from the third second to 5 s before the end,
/// of the kinds `kind`'s topology has (the network and memory faults only when
/// `network`).
pub fn plan(
    rng: &mut StdRng,
    kind: Kind,
    run_ms: u64,
    (claim_idle_ms, pay_timeout_ms): (u64, u64),
    network: bool,
) -> Vec<Planned> {
    let own: &[(FaultKind, u32)] = match kind {
        Kind::OneBox => &[
            (FaultKind::Kill, 5),
            (FaultKind::Pause, 4),
            (FaultKind::RedisRestart, 3),
            (FaultKind::RedisWiped, 2),
            (FaultKind::DbStall, 5),
            (FaultKind::DiskFull, 3),
            (FaultKind::PubSubCut, 3),
        ],
        Kind::Full => &[
            (FaultKind::Kill, 4),
            (FaultKind::Pause, 3),
            (FaultKind::MasterKill, 3),
            (FaultKind::DbStall, 3),
            (FaultKind::DbRestart, 2),
            (FaultKind::ClockOffset, 2),
            (FaultKind::PubSubCut, 2),
        ],
    };
    // Every topology's network and memory faults.
    let shared = [
        (FaultKind::LinkCut, 2),
        (FaultKind::AnswersLost, 2),
        (FaultKind::LinkDelay, 2),
        (FaultKind::LinkFlaky, 2),
        (FaultKind::LinkTrickle, 1),
        (FaultKind::RedisFull, 2),
        (FaultKind::EvictingPolicy, 1),
    ];
    let shared: &[(FaultKind, u32)] = if network { &shared } else { &[] };
    // Partitions inside the cluster.
    let partitions: &[(FaultKind, u32)] =
        if network && kind == Kind::Full { &[(FaultKind::ReplicaCut, 2), (FaultKind::MasterIsolated, 2)] } else { &[] };
    let kinds: Vec<(FaultKind, u32)> = own.iter().chain(shared).chain(partitions).copied().collect();
    let weights: u32 = kinds.iter().map(|(_, w)| w).sum();
    let mut faults = Vec::new();
    let mut at = 3_000;
    while at + 5_000 < run_ms {
        let mut draw = rng.random_range(0..weights);
        let kind = kinds
            .iter()
            .find(|(_, w)| {
                if draw < *w {
                    true
                } else {
                    draw -= w;
                    false
                }
            })
            .map_or(FaultKind::Kill, |k| k.0);
        let hold = match kind {
            FaultKind::Kill => rng.random_range(500..3_000),
            // Past the claim time: the others take over what it holds.
            FaultKind::Pause => claim_idle_ms + rng.random_range(500..3_000),
            FaultKind::RedisRestart | FaultKind::RedisWiped => rng.random_range(300..3_000),
            // Past the cluster's node timeout (2 s): its replica takes over.
            FaultKind::MasterKill => rng.random_range(3_000..6_000),
            // Sometimes past the time to pay: orders saved after it keep theirs.
            FaultKind::DbStall => rng.random_range(1_000..pay_timeout_ms + 3_000),
            FaultKind::DiskFull => rng.random_range(1_000..8_000),
            FaultKind::DbRestart => rng.random_range(500..3_000),
            FaultKind::ClockOffset => rng.random_range(8_000..20_000),
            FaultKind::PubSubCut => 0,
            FaultKind::LinkCut => rng.random_range(1_000..5_000),
            FaultKind::AnswersLost => rng.random_range(1_000..4_000),
            FaultKind::LinkDelay => rng.random_range(3_000..10_000),
            FaultKind::LinkFlaky => rng.random_range(2_000..5_000),
            FaultKind::LinkTrickle => rng.random_range(3_000..8_000),
            FaultKind::RedisFull => rng.random_range(2_000..8_000),
            FaultKind::ReplicaCut => rng.random_range(2_000..10_000),
            // Past the node timeout (2 s), mostly: the others fail it over.
            FaultKind::MasterIsolated => rng.random_range(1_500..8_000),
            // Held while the app starts and is refused.
            FaultKind::EvictingPolicy => 0,
        };
        // An app or a master (modulo how many there are); for a clock offset, six
        // offsets times three apps.
        let target = if kind == FaultKind::ClockOffset { rng.random_range(0..18) } else { rng.random_range(0..3) };
        faults.push(Planned { at, kind, app: target, hold, detail: rng.random() });
        at += rng.random_range(2_000..8_000);
    }
    faults
}

/// Runs the schedule on `topology`; returns once every fault is healed.
pub async fn run(topology: Arc<Topology>, history: Arc<History>, schedule: Vec<Planned>) {
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
    /// The links under a fault now, by their proxy's port.
    links: std::sync::Mutex<HashSet<u16>>,
}

impl Locks {
    /// Takes the link on proxy `port` for a fault; `None` while another fault has it.
    fn link(&self, port: u16) -> Option<LinkTaken<'_>> {
        // Built only when taken: a `LinkTaken` dropped frees the link.
        let taken = self.links.lock().unwrap().insert(port);
        taken.then(|| LinkTaken { locks: self, port })
    }
}

/// A link under a fault; free again when dropped.
struct LinkTaken<'a> {
    locks: &'a Locks,
    port: u16,
}

impl Drop for LinkTaken<'_> {
    fn drop(&mut self) {
        self.locks.links.lock().unwrap().remove(&self.port);
    }
}

async fn inject(topology: &Topology, history: &History, locks: &Locks, p: Planned) {
    let hold = Duration::from_millis(p.hold);
    let start = history.now();
    let apps = topology.apps.len();
    let target = match p.kind {
        FaultKind::Kill | FaultKind::Pause | FaultKind::ClockOffset => {
            let index = if p.kind == FaultKind::ClockOffset { p.app / 6 % apps } else { p.app % apps };
            let Ok(mut app) = topology.apps[index].try_lock() else { return };
            match p.kind {
                FaultKind::Kill => {
                    topology.kill(&mut app).await;
                    tokio::time::sleep(hold).await;
                    start_again(topology, history, &mut app, 0).await;
                }
                FaultKind::Pause => {
                    app.signal(libc::SIGSTOP);
                    tokio::time::sleep(hold).await;
                    app.signal(libc::SIGCONT);
                }
                _ => {
                    // 5, 10 or 30 s fast or slow.
                    let m = p.app % 6;
                    let offset = [5, 10, 30][m / 2] * if m.is_multiple_of(2) { 1 } else { -1 };
                    topology.stop_app(&mut app).await;
                    start_again(topology, history, &mut app, offset).await;
                    tokio::time::sleep(hold).await;
                    topology.stop_app(&mut app).await;
                    start_again(topology, history, &mut app, 0).await;
                }
            }
            app.name()
        }
        FaultKind::RedisRestart | FaultKind::RedisWiped => {
            let Ok(_redis) = locks.redis.try_lock() else { return };
            if !topology.crash_redis().await {
                return;
            }
            if p.kind == FaultKind::RedisWiped {
                if let Err(e) = topology.wipe_redis() {
                    history.broken(format!("Redis's file not removed: {e}"));
                }
            }
            tokio::time::sleep(hold).await;
            retry(history, "Redis", || topology.start_redis()).await;
            "redis".to_owned()
        }
        FaultKind::MasterKill => {
            let Ok(_redis) = locks.redis.try_lock() else { return };
            match topology.kill_master(p.app, hold).await {
                Ok(Some(node)) => node,
                Ok(None) => return,
                Err(e) => {
                    history.broken(format!("a Redis master killed: {e}"));
                    return;
                }
            }
        }
        FaultKind::DbStall => {
            let Ok(_db) = locks.db.try_lock() else { return };
            if let Err(e) = topology.hold_write_lock(hold).await {
                eprintln!("chaos: the database stall did not start: {e}");
                return;
            }
            "db".to_owned()
        }
        FaultKind::DiskFull => {
            let Ok(_db) = locks.db.try_lock() else { return };
            match topology.fill_disk(hold).await {
                Ok(true) => "db".to_owned(),
                Ok(false) => return,
                Err(e) => {
                    history.broken(format!("the database's disk: {e}"));
                    return;
                }
            }
        }
        FaultKind::DbRestart => {
            let Ok(_db) = locks.db.try_lock() else { return };
            match topology.restart_db(hold).await {
                Ok(true) => "db".to_owned(),
                Ok(false) => return,
                Err(e) => {
                    history.broken(format!("PostgreSQL restart: {e}"));
                    return;
                }
            }
        }
        FaultKind::PubSubCut => {
            let Ok(_redis) = locks.redis.try_lock() else { return };
            topology.cut_pubsub().await;
            "redis".to_owned()
        }
        FaultKind::ReplicaCut | FaultKind::MasterIsolated => {
            let Ok(_redis) = locks.redis.try_lock() else { return };
            match topology.cut_master_off(p.app, hold, p.kind == FaultKind::MasterIsolated).await {
                Ok(Some(node)) => node,
                Ok(None) => return,
                Err(e) => {
                    history.broken(format!("a Redis partition: {e}"));
                    return;
                }
            }
        }
        FaultKind::RedisFull => {
            let Ok(_redis) = locks.redis.try_lock() else { return };
            if let Err(e) = topology.fill_redis_memory(hold).await {
                history.broken(format!("Redis memory filled: {e}"));
                return;
            }
            "redis".to_owned()
        }
        FaultKind::LinkCut
        | FaultKind::AnswersLost
        | FaultKind::LinkDelay
        | FaultKind::LinkFlaky
        | FaultKind::LinkTrickle => {
            // On the full topology every other one hits the apps' links to a master.
            let to_redis = topology.kind == Kind::Full && (p.detail >> 32) & 1 == 1;
            let Some((link, target)) = topology.link(p.app, to_redis).await else { return };
            let Some(_taken) = locks.link(link.port) else { return };
            link.set(link_mode(p.kind, p.detail));
            tokio::time::sleep(hold).await;
            link.set(Mode::Open);
            target
        }
        FaultKind::EvictingPolicy => {
            let Ok(_redis) = locks.redis.try_lock() else { return };
            let Ok(mut app) = topology.apps[p.app % apps].try_lock() else { return };
            start_on_evicting(topology, history, &mut app, p.detail as usize).await;
            app.name()
        }
    };
    history.fault(Fault { kind: p.kind, target, start, end: history.now() });
}

/// Sets the `pick`-th Redis node to evict keys and starts `app` again on it, which
/// must refuse to start (the checker judges what it did); then sets the node back and
/// starts the app again.
async fn start_on_evicting(topology: &Topology, history: &History, app: &mut App, pick: usize) {
    let node = match topology.set_evicting(pick, true).await {
        Ok(node) => node,
        Err(e) => {
            eprintln!("chaos: the evicting policy was not set: {e}");
            let _ = topology.set_evicting(pick, false).await;
            return;
        }
    };
    topology.stop_app(app).await;
    let started = topology.start_app(app, 0).await;
    history.evicting_start(EvictingStart { app: app.name(), node, refused: started.as_ref().err().cloned() });
    if started.is_ok() {
        topology.stop_app(app).await;
    } else {
        topology.kill(app).await;
    }
    retry(history, "noeviction on the Redis node", || async { topology.set_evicting(pick, false).await.map(drop) })
        .await;
    start_again(topology, history, app, 0).await;
}

/// What a link fault does to the link, `detail` choosing how much.
fn link_mode(kind: FaultKind, detail: u64) -> Mode {
    match kind {
        FaultKind::LinkCut => Mode::Cut,
        FaultKind::AnswersLost => Mode::AnswersLost,
        FaultKind::LinkDelay => {
            let ms = 50 + detail % 1_951;
            Mode::Delay { ms, jitter: ms / 4 }
        }
        FaultKind::LinkFlaky => Mode::Flaky { share: 0.2 + (detail % 61) as f64 / 100.0 },
        _ => Mode::Trickle { bytes_per_s: 2_000 + detail % 18_001 },
    }
}

/// Starts an app again (its clock `offset_s` off), trying [`RESTART_TRIES`] times.
async fn start_again(topology: &Topology, history: &History, app: &mut App, offset_s: i64) {
    for tries in 1..=RESTART_TRIES {
        match topology.start_app(app, offset_s).await {
            Ok(()) => return,
            Err(e) if tries == RESTART_TRIES => {
                history.broken(format!("{} did not start again in {tries} tries: {e}", app.name()));
            }
            Err(e) => {
                eprintln!("chaos: starting {} again: {e}; trying again", app.name());
                topology.kill(app).await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Runs `start` until it succeeds, [`RESTART_TRIES`] times at most.
async fn retry<F, Fut>(history: &History, what: &str, start: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    for tries in 1..=RESTART_TRIES {
        match start().await {
            Ok(()) => return,
            Err(e) if tries == RESTART_TRIES => history.broken(format!("{what} did not start again: {e}")),
            Err(e) => {
                eprintln!("chaos: starting {what} again: {e}; trying again");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_under_a_fault_is_not_taken_twice_and_is_free_once_healed() {
        let locks = Locks::default();
        let first = locks.link(7).expect("a free link is taken");
        assert!(locks.link(7).is_none(), "a link under a fault is skipped");
        assert!(locks.link(8).is_some(), "another link is free");
        drop(first);
        assert!(locks.link(7).is_some(), "free again once healed");
    }
}
