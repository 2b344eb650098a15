//! CPU time of the server processes, Redis and the database, read from `/proc`.

/// CPU time of the server processes and of Redis, from `/proc/<pid>/stat`, and the
/// servers' peak memory.
pub(crate) struct Cpu {
    servers: Vec<u32>,
    redis: Vec<u32>,
    db: Option<u32>,
}

pub(crate) struct CpuSample {
    pub(crate) server: f64,
    /// The part of `server` spent in the kernel (sockets, mostly).
    pub(crate) server_kernel: f64,
    /// The part of `server` spent in SQLite's threads (sqlx runs each SQLite
    /// connection on a thread of its own); zero on PostgreSQL.
    pub(crate) server_sqlite: f64,
    pub(crate) redis: f64,
    /// `redis` per Redis process, in the order given (a cluster's nodes).
    pub(crate) redis_each: Vec<f64>,
    /// The database server's processes, when it runs apart (PostgreSQL).
    pub(crate) db: Option<f64>,
    /// This load tool, to show how much of the machine it took.
    pub(crate) tool: f64,
}

impl Cpu {
    pub(crate) fn new(servers: &str, redis: &str, db: Option<u32>) -> Self {
        let pids = |s: &str| s.split(',').filter_map(|p| p.trim().parse().ok()).collect();
        Self { servers: pids(servers), redis: pids(redis), db }
    }

    /// The largest peak resident set of the server processes so far (`VmHWM`), in MB.
    pub(crate) fn peak_rss_mb(&self) -> Option<f64> {
        let peak = |pid: &u32| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<f64>().ok()
        };
        let kib = self.servers.iter().map(peak).collect::<Option<Vec<f64>>>()?;
        kib.into_iter().reduce(f64::max).map(|k| k / 1024.0)
    }

    pub(crate) fn sample(&self) -> Option<CpuSample> {
        if self.servers.is_empty() || self.redis.is_empty() {
            return None;
        }
        let total = |pids: &[u32]| {
            let times = pids.iter().map(|&p| cpu_seconds(p)).collect::<Option<Vec<_>>>()?;
            Some(times.into_iter().fold((0.0, 0.0), |(u, k), t| (u + t.0, k + t.1)))
        };
        let (user, kernel) = total(&self.servers)?;
        let redis = total(&self.redis)?;
        let redis_each = self.redis.iter().map(|&p| cpu_seconds(p).map(|(u, k)| u + k)).collect::<Option<Vec<_>>>()?;
        let tool = cpu_seconds(std::process::id())?;
        Some(CpuSample {
            server: user + kernel,
            server_kernel: kernel,
            server_sqlite: self.servers.iter().map(|&p| sqlite_thread_seconds(p)).sum(),
            redis: redis.0 + redis.1,
            redis_each,
            db: self.db.and_then(tree_cpu_seconds),
            tool: tool.0 + tool.1,
        })
    }
}

/// CPU seconds of a process and its children: the live ones (PostgreSQL's backends)
/// and those it has reaped.
pub(crate) fn tree_cpu_seconds(pid: u32) -> Option<f64> {
    let own: f64 = cpu_times(pid)?.iter().sum();
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    let live: f64 = children.split_whitespace().filter_map(|c| cpu_seconds(c.parse().ok()?)).map(|(u, k)| u + k).sum();
    Some(own + live)
}

/// CPU seconds spent between two samples.
pub(crate) fn spent(before: Option<CpuSample>, after: Option<CpuSample>) -> Option<CpuSample> {
    let (b, a) = (before?, after?);
    Some(CpuSample {
        server: a.server - b.server,
        server_kernel: a.server_kernel - b.server_kernel,
        // A connection closed in between takes its thread's time with it: never below zero.
        server_sqlite: (a.server_sqlite - b.server_sqlite).max(0.0),
        redis: a.redis - b.redis,
        redis_each: a.redis_each.iter().zip(&b.redis_each).map(|(a, b)| a - b).collect(),
        db: a.db.zip(b.db).map(|(a, b)| a - b),
        tool: a.tool - b.tool,
    })
}

/// CPU seconds of a server's SQLite threads, found by the name sqlx gives them
/// (`sqlx-sqlite-worker-<n>`, cut to 15 bytes by the kernel).
pub(crate) fn sqlite_thread_seconds(pid: u32) -> f64 {
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
pub(crate) fn cpu_seconds(pid: u32) -> Option<(f64, f64)> {
    let [user, system, ..] = cpu_times(pid)?;
    Some((user, system))
}

/// A process's user and system CPU seconds, then those of the children it has reaped
/// (fields 14 to 17 of its `stat`, in clock ticks of 1/100 s, Linux's USER_HZ).
pub(crate) fn cpu_times(pid: u32) -> Option<[f64; 4]> {
    cpu_times_at(&format!("/proc/{pid}/stat"))
}

/// The same four figures from a `stat` file (a process's or one thread's).
pub(crate) fn cpu_times_at(path: &str) -> Option<[f64; 4]> {
    let stat = std::fs::read_to_string(path).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let seconds = |i: usize| Some(fields.get(i)?.parse::<f64>().ok()? / 100.0);
    Some([seconds(11)?, seconds(12)?, seconds(13)?, seconds(14)?])
}
