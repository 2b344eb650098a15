//! What happened during a run: every operation a client made (invoked when, answered
//! what, when) and every fault the nemesis injected. The checker and the timeline read
//! it after the run.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

/// One call a shopper or an operator made.
#[derive(Clone, Debug)]
pub struct Op {
    pub kind: OpKind,
    /// The app process it went to.
    pub process: usize,
    pub user: Option<i64>,
    pub voucher: i64,
    /// Since the run's start (ms).
    pub invoked: u64,
    pub answered: u64,
    /// When the answer came, by this machine's clock (Unix ms): what deadlines, which
    /// the database's clock sets, are compared with.
    pub answered_at: i64,
    /// The HTTP status, or `None` when no answer came (connection refused, cut, timed out).
    pub status: Option<u16>,
    /// The answer's error code, the grab result's status, or the transport error.
    pub code: String,
    /// The order the call was about (a grab's answer names it).
    pub order: Option<String>,
    /// A granted grab's receipt, which asking about it presents (`sale::receipt`), or
    /// the held order's, which `already_bought` carries.
    pub receipt: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    Grab,
    /// The last `grab_result` poll of a granted grab.
    Result,
    Pay,
    Cancel,
    AddStock(i64),
    Withdraw(i64),
    Pause,
    Resume,
    /// `update_voucher` moving the sale's end (always past the run): a window change,
    /// written to the database and pushed to every bucket, under the faults.
    EditEnd,
    /// `sign_out` of a session made for it (the leavers, `Workload::leaver`).
    SignOut,
    /// A call (`my_orders`) with the cookie of a session signed out: it must be
    /// refused, on every process, soon after the sign-out was answered.
    Probe,
}

impl Op {
    pub fn took(&self) -> u64 {
        self.answered.saturating_sub(self.invoked)
    }

    /// A grab that names an order of its shopper's: granted, or refused as
    /// `already_bought` (the order they hold: perhaps an earlier grab's whose answer
    /// was lost, and which they learn of only so).
    pub fn names_a_grant(&self) -> bool {
        self.kind == OpKind::Grab && (self.status == Some(200) || self.code == "already_bought")
    }
}

/// One fault, from when it was injected to when it was healed.
#[derive(Clone, Debug)]
pub struct Fault {
    pub kind: FaultKind,
    /// What it hit: `app-1`, `redis`, `db`…
    pub target: String,
    pub start: u64,
    pub end: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// An app process killed (SIGKILL) and started again.
    Kill,
    /// An app process stopped (SIGSTOP) past the claim time, then continued.
    Pause,
    /// Redis killed and started again from its append-only file.
    RedisRestart,
    /// Redis killed and started again without its file (a disk lost): every sale is
    /// rebuilt from the database, and grants no worker had saved are lost.
    RedisWiped,
    /// The database's write lock held.
    DbStall,
    /// The database's disk full (one box: SQLite on a tmpfs of the run's own, filled
    /// to the last byte), then freed.
    DiskFull,
    /// Every pub/sub connection cut.
    PubSubCut,
    /// A Redis Cluster master killed (its replica takes over), started again later.
    MasterKill,
    /// PostgreSQL stopped at once and started again.
    DbRestart,
    /// An app process started again with its clock off, then again without.
    ClockOffset,
    /// A link cut both ways (a partition). The link faults hit an app's link to its
    /// store (Redis on one box, the database on the full topology) or, on the full
    /// topology, every app's link to one Redis master.
    LinkCut,
    /// A link passing requests but losing answers (one way).
    AnswersLost,
    /// Every packet on a link delayed (50 ms to 2 s, with jitter).
    LinkDelay,
    /// A share of a link's connections reset, open or new.
    LinkFlaky,
    /// A link slowed to a trickle (2 to 20 KB/s).
    LinkTrickle,
    /// Every Redis node's memory full (`maxmemory` at what it holds, `noeviction`):
    /// every write refused.
    RedisFull,
    /// A Redis Cluster master cut off from its replica (replication and bus), while
    /// the apps and the other masters reach both.
    ReplicaCut,
    /// A Redis Cluster master cut off from every other node while the apps still
    /// reach it: the others fail it over, and what it took meanwhile is lost when it
    /// rejoins.
    MasterIsolated,
    /// One Redis node set to evict keys (`volatile-lru` under a `maxmemory` limit, what
    /// managed services default to) while an app starts again: the app must refuse to
    /// start. Then the node's `noeviction` back, and the app started.
    EvictingPolicy,
}

impl FaultKind {
    pub const ALL: [FaultKind; 19] = [
        FaultKind::Kill,
        FaultKind::Pause,
        FaultKind::RedisRestart,
        FaultKind::RedisWiped,
        FaultKind::MasterKill,
        FaultKind::DbStall,
        FaultKind::DiskFull,
        FaultKind::DbRestart,
        FaultKind::ClockOffset,
        FaultKind::PubSubCut,
        FaultKind::LinkCut,
        FaultKind::AnswersLost,
        FaultKind::LinkDelay,
        FaultKind::LinkFlaky,
        FaultKind::LinkTrickle,
        FaultKind::RedisFull,
        FaultKind::ReplicaCut,
        FaultKind::MasterIsolated,
        FaultKind::EvictingPolicy,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Kill => "kill -9 + restart",
            Self::Pause => "SIGSTOP/SIGCONT",
            Self::RedisRestart => "Redis restart (AOF)",
            Self::RedisWiped => "Redis restart, file lost",
            Self::DbStall => "database stall",
            Self::DiskFull => "database disk full",
            Self::PubSubCut => "pub/sub cut",
            Self::MasterKill => "Redis master killed",
            Self::DbRestart => "PostgreSQL restart",
            Self::ClockOffset => "clock offset",
            Self::LinkCut => "link cut",
            Self::AnswersLost => "answers lost",
            Self::LinkDelay => "link delayed",
            Self::LinkFlaky => "connections reset",
            Self::LinkTrickle => "link trickle",
            Self::RedisFull => "Redis memory full",
            Self::ReplicaCut => "replica cut off",
            Self::MasterIsolated => "master isolated",
            Self::EvictingPolicy => "evicting policy",
        }
    }

    /// The timeline's colour.
    pub fn colour(self) -> &'static str {
        match self {
            Self::Kill => "#d62728",
            Self::Pause => "#ff7f0e",
            Self::RedisRestart => "#9467bd",
            Self::RedisWiped => "#6b3d9a",
            Self::DbStall => "#8c564b",
            Self::DiskFull => "#c49c94",
            Self::PubSubCut => "#17becf",
            Self::MasterKill => "#e377c2",
            Self::DbRestart => "#bcbd22",
            Self::ClockOffset => "#393b79",
            Self::LinkCut => "#2ca02c",
            Self::AnswersLost => "#98df8a",
            Self::LinkDelay => "#aec7e8",
            Self::LinkFlaky => "#7f7f7f",
            Self::LinkTrickle => "#dbdb8d",
            Self::RedisFull => "#c5b0d5",
            Self::ReplicaCut => "#f7b6d2",
            Self::MasterIsolated => "#843c39",
            Self::EvictingPolicy => "#637939",
        }
    }
}

/// An app started while a Redis node it uses was set to evict keys (the nemesis's
/// evicting policy).
#[derive(Clone, Debug)]
pub struct EvictingStart {
    pub app: String,
    pub node: String,
    /// Why the start was refused (the app's last log line), or `None`: it started.
    pub refused: Option<String>,
}

/// The run's record, written by every task.
pub struct History {
    pub started: Instant,
    ops: Mutex<Vec<Op>>,
    faults: Mutex<Vec<Fault>>,
    /// What went wrong with the run itself (a process that would not start again):
    /// such a run proves nothing and fails.
    broken: Mutex<Vec<String>>,
    evicting_starts: Mutex<Vec<EvictingStart>>,
    /// Each live-feed snapshot's arrival: (app process, ms since the start).
    snapshots: Mutex<Vec<(usize, u64)>>,
}

impl History {
    pub fn new() -> Self {
        Self {
            started: Instant::now(),
            ops: Mutex::default(),
            faults: Mutex::default(),
            broken: Mutex::default(),
            evicting_starts: Mutex::default(),
            snapshots: Mutex::default(),
        }
    }

    /// Milliseconds since the run started.
    pub fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub fn since(&self, ms: u64) -> Duration {
        Duration::from_millis(self.now().saturating_sub(ms))
    }

    pub fn op(&self, op: Op) {
        self.ops.lock().unwrap().push(op);
    }

    pub fn fault(&self, fault: Fault) {
        self.faults.lock().unwrap().push(fault);
    }

    pub fn broken(&self, why: String) {
        self.broken.lock().unwrap().push(why);
    }

    pub fn what_broke(&self) -> Vec<String> {
        self.broken.lock().unwrap().clone()
    }

    pub fn evicting_start(&self, start: EvictingStart) {
        self.evicting_starts.lock().unwrap().push(start);
    }

    pub fn evicting_starts(&self) -> Vec<EvictingStart> {
        self.evicting_starts.lock().unwrap().clone()
    }

    /// A snapshot of process `process`'s live feed arrived now.
    pub fn snapshot(&self, process: usize) {
        let now = self.now();
        self.snapshots.lock().unwrap().push((process, now));
    }

    pub fn snapshots(&self) -> Vec<(usize, u64)> {
        self.snapshots.lock().unwrap().clone()
    }

    pub fn ops(&self) -> Vec<Op> {
        self.ops.lock().unwrap().clone()
    }

    pub fn faults(&self) -> Vec<Fault> {
        let mut faults = self.faults.lock().unwrap().clone();
        faults.sort_by_key(|f| f.start);
        faults
    }
}
