//! Settings, from flags or the environment. Every default makes the one-command run work.

use clap::Parser;
use std::net::SocketAddr;

/// Seckill server: flash sales with a Redis gate and a stream worker into SQL.
#[derive(Parser, Clone, Debug)]
#[command(name = "seckill", version, about)]
pub struct Config {
    /// What to do instead of serving: manage operators.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Address to listen on. Defaults to `site-addr` in Cargo.toml (127.0.0.1:3000).
    #[arg(long = "addr", env = "LEPTOS_SITE_ADDR")]
    pub site_addr: Option<SocketAddr>,

    /// Redis to use. When unset, a private `redis-server` is started on loopback
    /// (data under `./data/redis`) and stopped on exit.
    #[arg(long, env = "REDIS_URL")]
    pub redis_url: Option<String>,

    /// SQL database. Defaults to the SQLite file `./data/seckill.db`.
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite://data/seckill.db")]
    pub database_url: String,

    /// Token for admin calls (`Authorization: Bearer <token>`). When unset, one is
    /// generated and printed at start.
    #[arg(long, env = "SECKILL_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,

    /// Secret that signs session cookies (at least 32 bytes). When unset, a random one
    /// is used, so sessions end when the process does.
    #[arg(long, env = "SECKILL_SESSION_SECRET", hide_env_values = true)]
    pub session_secret: Option<String>,

    /// Prefix of every Redis key and channel, so several deployments (or tests) can
    /// share one Redis.
    #[arg(long, env = "SECKILL_REDIS_NAMESPACE", default_value = "seckill")]
    pub redis_namespace: String,

    /// How long (ms) an SQLite write waits for another writer's lock before it fails
    /// (the worker then retries the batch; nothing is failed for it).
    #[arg(long, env = "SECKILL_DB_BUSY_MS", default_value_t = 10_000)]
    pub db_busy_ms: u64,

    /// Run the stream worker in this process (turn off for API-only instances).
    #[arg(long, env = "SECKILL_WORKER", default_value_t = true, action = clap::ArgAction::Set)]
    pub worker: bool,

    /// Consumer name of this process's worker. Unique per process by default; set it
    /// to a stable name so a restarted process drains its own pending list at once.
    /// One running process's at a time: a second started under it waits up to 6 s
    /// (the holder may have just died), then refuses to start.
    #[arg(long, env = "SECKILL_WORKER_NAME")]
    pub worker_name: Option<String>,

    /// Orders the worker reads and writes per batch while this process grants (five
    /// times that once it is quiet: the backlog of a storm drains sooner). Each batch
    /// is done in one go, by the serving thread that runs the worker and by Redis
    /// (reading it, settling its results), and grabs wait behind it: smaller batches
    /// let grabs through sooner, larger ones persist a storm sooner.
    #[arg(long, env = "SECKILL_BATCH_SIZE", default_value_t = 100)]
    pub batch_size: usize,

    /// Longest pause (ms) between reads of a voucher stream that had nothing new.
    /// Orders this process grants wake its reader at once; this bounds how soon
    /// orders granted by other processes are picked up when the stream was idle.
    #[arg(long, env = "SECKILL_POLL_MS", default_value_t = 100)]
    pub poll_ms: u64,

    /// Redis replicas that must hold the orders a worker read before it saves them, a
    /// cancelled order's give-back before its debt is struck, an operator's change
    /// of a sale before it answers, and a block of order ids before it is used (Redis
    /// `WAIT`). Set 1 when Redis has replicas: a failover then never loses a grant the
    /// database already has, nor a unit given back, nor (while a replica is in sync)
    /// hands out an order id twice. 0 (the default): no replicas, no wait.
    #[arg(long, env = "SECKILL_WAIT_REPLICAS", default_value_t = 0)]
    pub wait_replicas: u32,

    /// Longest wait (ms) for those replicas (at most 4000); past it the batch is not
    /// saved yet (its orders stay queued, read again after a pause of up to a second),
    /// a block of order ids (which waits 20 ms at most) is used all the same (grabs go
    /// on), and the short wait is counted (`seckill_replica_waits_short_total`).
    #[arg(long, env = "SECKILL_WAIT_REPLICAS_MS", default_value_t = 100)]
    pub wait_replicas_ms: u64,

    /// Orders pending this long (ms) on another consumer are taken over: that
    /// consumer is presumed dead.
    #[arg(long, env = "SECKILL_CLAIM_IDLE_MS", default_value_t = 30_000)]
    pub claim_idle_ms: u64,

    /// Deliveries after which an order goes to the dead-letter stream, its result
    /// becomes "failed" and its stock and buyer slot are given back.
    #[arg(long, env = "SECKILL_MAX_DELIVERIES", default_value_t = 10)]
    pub max_deliveries: u64,

    /// How long (ms) a sold-out flag refuses grabs without asking Redis. Short, because
    /// pub/sub may lose the restock event that would clear it.
    #[arg(long, env = "SECKILL_SOLD_OUT_TTL_MS", default_value_t = 2_000)]
    pub sold_out_ttl_ms: u64,

    /// Grabs one process lets wait on the gate at once; more are answered 503
    /// `unavailable` (with `Retry-After`) at once instead of queueing (`sale::admission`).
    /// Unset: [`Config::grabs_in_flight`].
    #[arg(long, env = "SECKILL_MAX_GRABS_IN_FLIGHT")]
    pub max_grabs_in_flight: Option<usize>,

    /// Gate latency (ms, averaged over recent grabs) past which grabs are shed once a
    /// quarter of `SECKILL_MAX_GRABS_IN_FLIGHT` are in flight.
    #[arg(long, env = "SECKILL_SHED_LATENCY_MS", default_value_t = 100)]
    pub shed_latency_ms: u64,

    /// How long (ms) after its grab (or its saving, if later) an order may be paid; then the sweeper cancels it
    /// and its unit goes back on sale.
    #[arg(long, env = "SECKILL_PAY_TIMEOUT_MS", default_value_t = 20 * 60 * 1000)]
    pub pay_timeout_ms: u64,

    /// The currency of every price (ISO 4217, e.g. EUR, USD, JPY); prices are whole
    /// minor units of it (cents).
    #[arg(long, env = "SECKILL_CURRENCY", default_value = "EUR")]
    pub currency: String,

    /// How often (ms) the sweeper looks for overdue orders and unfinished give-backs.
    #[arg(long, env = "SECKILL_SWEEP_MS", default_value_t = 500)]
    pub sweep_ms: u64,

    /// API calls per second one signed-in shopper may make (twice that in a burst);
    /// more answer 429. 0 turns the limit off.
    #[arg(long, env = "SECKILL_RATE_PER_SESSION", default_value_t = 10)]
    pub rate_per_session: u32,

    /// API calls per second one client address may make (twice that in a burst). 0
    /// turns the limit off: load tests from one address need that.
    #[arg(long, env = "SECKILL_RATE_PER_ADDRESS", default_value_t = 100)]
    pub rate_per_address: u32,

    /// Memory (KiB) and passes of the argon2id hash of new passwords. The defaults are
    /// OWASP's (19 MiB, 2 passes); lower them only for tests. Existing hashes keep
    /// the cost they were made with.
    #[arg(long, env = "SECKILL_PASSWORD_MEMORY_KIB", default_value_t = 19 * 1024)]
    pub password_memory_kib: u32,
    #[arg(long, env = "SECKILL_PASSWORD_ITERATIONS", default_value_t = 2)]
    pub password_iterations: u32,

    /// Password hashes computed at once (default: half the cores, at least one), off
    /// the threads that serve grabs, and how many more may wait; past that, signing in
    /// answers 503 `unavailable` at once.
    #[arg(long, env = "SECKILL_HASH_THREADS")]
    pub hash_threads: Option<usize>,
    #[arg(long, env = "SECKILL_HASH_QUEUE", default_value_t = 64)]
    pub hash_queue: usize,

    /// The shop's own login (optional): shoppers may call with `Authorization: Bearer
    /// <JWT>` from the shop's identity provider, whose tokens carry this issuer (`iss`)
    /// and audience (`aud`), checked against the public keys in this file (a PEM public
    /// key, or a JWKS; RS256, ES256, EdDSA). All three or none.
    #[arg(long, env = "SECKILL_JWT_ISSUER")]
    pub jwt_issuer: Option<String>,
    #[arg(long, env = "SECKILL_JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,
    #[arg(long, env = "SECKILL_JWT_KEYS")]
    pub jwt_keys: Option<std::path::PathBuf>,

    /// Whether shoppers may make accounts with `sign_up` (`on` or `off`). Off by default
    /// when the shop's own login (SECKILL_JWT_*) is set: its shoppers have accounts there.
    #[arg(long, env = "SECKILL_SIGN_UP", value_parser = clap::builder::BoolishValueParser::new())]
    pub sign_up: Option<bool>,

    /// Sign-ups one address (an IPv6 /64 is one) may make per hour, across processes,
    /// and ten times that from one IPv6 /48 (one site's /64s together); more answer 429
    /// until the hour is over. 0: no quota (tests, load tools).
    #[arg(long, env = "SECKILL_SIGN_UP_QUOTA", default_value_t = 10)]
    pub sign_up_quota: u32,

    /// Whether a sign-up must carry a solved proof-of-work challenge
    /// (`sign_up_challenge`; the shop's form solves it): `on`, or `off` (tests, load tools).
    #[arg(long, env = "SECKILL_SIGN_UP_CHALLENGE", default_value = "on", action = clap::ArgAction::Set,
        value_parser = clap::builder::BoolishValueParser::new())]
    pub sign_up_challenge: bool,

    /// Address of the reverse proxy in front: only from it is `X-Forwarded-For` (the
    /// client's address, for rate limits) believed. Unset: the socket's peer is the client.
    #[arg(long, env = "SECKILL_TRUSTED_PROXY")]
    pub trusted_proxy: Option<std::net::IpAddr>,

    /// Live feeds (`/api/live`) open at once; more answer 503. Each holds a socket, so
    /// keep this below the process's file descriptor limit (`ulimit -n`).
    #[arg(long, env = "SECKILL_MAX_FEEDS", default_value_t = 10_000)]
    pub max_feeds: usize,

    /// Live feeds one client address may hold open at once; more answer 503.
    #[arg(long, env = "SECKILL_MAX_FEEDS_PER_ADDRESS", default_value_t = 64)]
    pub max_feeds_per_address: usize,

    /// Longest (ms) a live feed stays open; each ends between three quarters of it and
    /// all of it, and the browser reconnects to whichever process the balancer picks
    /// then. So feeds spread over processes added since, and feeds opened together
    /// (a sale's start) do not all reconnect together.
    #[arg(long, env = "SECKILL_FEED_LIFETIME_MS", default_value_t = FEED_LIFETIME_MS)]
    pub feed_lifetime_ms: u64,

    /// Requests served at once (live feeds aside); more answer 503 at once rather than
    /// queueing. One address may hold an eighth of them (up to a quarter for twice the
    /// per-address rate), an IPv6 /48 a quarter (429 past that; off with that limit).
    #[arg(long, env = "SECKILL_MAX_REQUESTS", default_value_t = 4_096)]
    pub max_requests: usize,

    /// How long (ms) a client may take to send a request's headers; a connection that
    /// sends none in that time, a kept-alive idle one included, is closed.
    #[arg(long, env = "SECKILL_HEADER_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_timeout_ms: u64,

    /// Longest (ms) a request may take, body included, before it answers 503
    /// `unavailable` (live feeds excepted: they stay open). Under 50000.
    #[arg(long, env = "SECKILL_REQUEST_TIMEOUT_MS", default_value_t = 30_000)]
    pub request_timeout_ms: u64,

    /// Mark cookies `Secure` (and name them with the `__Host-` prefix). Default: on
    /// unless the listen address is loopback. Turn off only to serve plain HTTP beyond
    /// loopback; turn on behind a TLS proxy that reaches this process on loopback.
    #[arg(long, env = "SECKILL_SECURE_COOKIES", action = clap::ArgAction::Set)]
    pub secure_cookies: Option<bool>,

    /// How long (ms) one render of the shop page (`/`) is served to every visitor. The
    /// page is the same for all (the browser asks who is signed in), and the burst of
    /// visitors just before a sale would otherwise render it thousands of times a
    /// second. Creating or warming a voucher, on any process, renders it afresh. 0
    /// turns it off.
    #[arg(long, env = "SECKILL_PAGE_CACHE_MS", default_value_t = 1_000)]
    pub page_cache_ms: u64,

    /// Order ids reserved from the Redis day counter at a time.
    #[arg(long, env = "SECKILL_ID_BLOCK", default_value_t = 1000)]
    pub id_block: u32,

    /// Threads serving HTTP, each a single-threaded runtime of its own (the first also
    /// runs the worker and the other background tasks). Default: one per core. Processes
    /// sharing one machine should share its cores: cores / processes each.
    #[arg(long, env = "SECKILL_THREADS")]
    pub threads: Option<usize>,
}

/// A command run instead of serving, against the configured database.
#[derive(clap::Subcommand, Clone, Debug)]
pub enum Command {
    /// Operator accounts (they sign in on the admin page by name and password).
    #[command(subcommand)]
    Operator(OperatorCommand),
    /// Prints the API's OpenAPI document (what `GET /api/openapi.json` answers;
    /// `npm run openapi` writes it to `docs/openapi.json`).
    Openapi,
}

#[derive(clap::Subcommand, Clone, Debug)]
pub enum OperatorCommand {
    /// Adds an operator. The password is asked for without echo on a terminal, or read
    /// as one line from standard input.
    Add {
        /// The operator's name (1–32 characters).
        name: String,
        /// `operator` runs sales; `admin` also adds operators.
        #[arg(long, default_value = "operator", value_parser = ["operator", "admin"])]
        role: String,
    },
    /// Lists the operators: name, role, last sign-in.
    List,
    /// Removes an operator: their operator cookies stop working on every running process
    /// within a second. The last admin cannot be removed.
    Remove { name: String },
    /// Gives an operator another role, on every running process within a second. The
    /// last admin cannot be demoted.
    SetRole {
        name: String,
        #[arg(value_parser = ["operator", "admin"])]
        role: String,
    },
}

/// Shortest admin token accepted: it is the only key to the admin door.
pub const MIN_ADMIN_TOKEN: usize = 16;
/// Largest batch: one transaction of this many orders, one XREADGROUP COUNT.
pub const MAX_BATCH: usize = 10_000;
/// Longest time to pay: a sale's Redis keys live a day past its end, and an order
/// cancelled later still gives its unit back in the database.
pub const MAX_PAY_TIMEOUT_MS: u64 = 30 * 24 * 3600 * 1000;
/// Longest a shop page render may be shared (`SECKILL_PAGE_CACHE_MS`).
pub const MAX_PAGE_CACHE_MS: u64 = 60_000;

/// The longest a live feed stays open unless set (`SECKILL_FEED_LIFETIME_MS`): 15 minutes.
pub const FEED_LIFETIME_MS: u64 = 15 * 60 * 1000;

impl Config {
    /// Refuses settings that cannot work, with a message naming the setting, rather than
    /// changing them silently. Trims the admin token (an empty one means "generate").
    pub fn check(mut self) -> Result<Self, String> {
        self.admin_token = self.admin_token.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
        if self.admin_token.as_ref().is_some_and(|t| t.chars().count() < MIN_ADMIN_TOKEN) {
            return Err(format!("SECKILL_ADMIN_TOKEN must have at least {MIN_ADMIN_TOKEN} characters"));
        }
        if !(1..=MAX_BATCH).contains(&self.batch_size) {
            return Err(format!("SECKILL_BATCH_SIZE must be between 1 and {MAX_BATCH}"));
        }
        for (name, value) in [
            ("SECKILL_POLL_MS", self.poll_ms),
            ("SECKILL_WAIT_REPLICAS_MS", self.wait_replicas_ms),
            ("SECKILL_CLAIM_IDLE_MS", self.claim_idle_ms),
            ("SECKILL_MAX_DELIVERIES", self.max_deliveries),
            ("SECKILL_ID_BLOCK", u64::from(self.id_block)),
            ("SECKILL_MAX_FEEDS", self.max_feeds as u64),
            ("SECKILL_MAX_FEEDS_PER_ADDRESS", self.max_feeds_per_address as u64),
            ("SECKILL_FEED_LIFETIME_MS", self.feed_lifetime_ms),
            ("SECKILL_MAX_REQUESTS", self.max_requests as u64),
            ("SECKILL_HEADER_TIMEOUT_MS", self.header_timeout_ms),
            ("SECKILL_PAY_TIMEOUT_MS", self.pay_timeout_ms),
            ("SECKILL_SWEEP_MS", self.sweep_ms),
            ("SECKILL_MAX_GRABS_IN_FLIGHT", self.max_grabs_in_flight.unwrap_or(1) as u64),
            ("SECKILL_SHED_LATENCY_MS", self.shed_latency_ms),
            ("SECKILL_REQUEST_TIMEOUT_MS", self.request_timeout_ms),
            ("SECKILL_THREADS", self.threads.unwrap_or(1) as u64),
            ("SECKILL_PASSWORD_ITERATIONS", u64::from(self.password_iterations)),
            ("SECKILL_HASH_THREADS", self.hash_threads.unwrap_or(1) as u64),
        ] {
            if value == 0 {
                return Err(format!("{name} must be at least 1"));
            }
        }
        // A render shows the stock left when it was made: keep a first paint within
        // about a minute of the truth (the browser's live feed corrects it after).
        if self.page_cache_ms > MAX_PAGE_CACHE_MS {
            return Err(format!("SECKILL_PAGE_CACHE_MS must be at most {MAX_PAGE_CACHE_MS}"));
        }
        // A call under an Idempotency-Key ends within its key's pending mark
        // (`server::idempotency::LONGEST_CALL`), or a retry could run it twice.
        if self.request_timeout_ms >= 50_000 {
            return Err("SECKILL_REQUEST_TIMEOUT_MS must be under 50000".into());
        }
        // Beyond Redis's reply timeout (5 s) the wait would fail instead of running out.
        if self.wait_replicas_ms > 4_000 {
            return Err("SECKILL_WAIT_REPLICAS_MS must be at most 4000".into());
        }
        if self.pay_timeout_ms > MAX_PAY_TIMEOUT_MS {
            return Err("SECKILL_PAY_TIMEOUT_MS must be at most 30 days".into());
        }
        let jwt = [self.jwt_issuer.is_some(), self.jwt_audience.is_some(), self.jwt_keys.is_some()];
        if jwt.iter().any(|set| *set) && !jwt.iter().all(|set| *set) {
            return Err("SECKILL_JWT_ISSUER, SECKILL_JWT_AUDIENCE and SECKILL_JWT_KEYS go together".into());
        }
        // argon2's own floor (8 KiB per lane).
        if self.password_memory_kib < 8 {
            return Err("SECKILL_PASSWORD_MEMORY_KIB must be at least 8".into());
        }
        if !crate::money::is_code(&self.currency) {
            return Err("SECKILL_CURRENCY must be an ISO 4217 code, three capital letters like EUR".into());
        }
        if self.redis_namespace.is_empty() || self.redis_namespace.contains(['{', '}', ' ']) {
            return Err("SECKILL_REDIS_NAMESPACE must be non-empty, without braces or spaces".into());
        }
        Ok(self)
    }

    /// How many password hashes run at once (`SECKILL_HASH_THREADS`, or half the cores).
    /// Whether `sign_up` is open: as set, else unless the shop's own login is.
    pub fn sign_up_open(&self) -> bool {
        self.sign_up.unwrap_or(self.jwt_keys.is_none())
    }

    pub fn hash_threads(&self) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        self.hash_threads.unwrap_or(cores / 2).max(1)
    }

    /// The cap of grabs in flight: `SECKILL_MAX_GRABS_IN_FLIGHT`, or 128 per serving
    /// thread and at least 256. A many-core process answers more at once: 16 cores
    /// granted 224k grabs a second with about 450 in flight (docs/testing.md), where a
    /// cap of 256 would have shed them.
    pub fn grabs_in_flight(&self) -> usize {
        self.max_grabs_in_flight.unwrap_or_else(|| (128 * self.serving_threads()).max(256))
    }

    /// How many threads serve HTTP (`SECKILL_THREADS`, or one per core).
    pub fn serving_threads(&self) -> usize {
        self.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// The defaults, as if no flag or variable were given, whatever the environment
    /// holds (for tests and tools: a developer's `SECKILL_*` must not change them).
    pub fn defaults() -> Self {
        use clap::{CommandFactory, FromArgMatches};
        let command = Self::command().mut_args(|arg| arg.env(None::<&str>));
        Self::from_arg_matches(&command.get_matches_from(["seckill"])).expect("every setting has a default")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(args: &[&str]) -> Result<Config, String> {
        Config::try_parse_from(std::iter::once("seckill").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?
            .check()
    }

    #[test]
    fn settings_that_cannot_work_are_refused_by_name() {
        assert!(with(&[]).is_ok());
        let trimmed = with(&["--admin-token", "  a-long-enough-admin-token \n"]).unwrap();
        assert_eq!(trimmed.admin_token.as_deref(), Some("a-long-enough-admin-token"));
        assert_eq!(with(&["--admin-token", "   "]).unwrap().admin_token, None, "blank means generate");
        assert!(with(&["--admin-token", "short"]).unwrap_err().contains("SECKILL_ADMIN_TOKEN"));
        assert!(with(&["--batch-size", "0"]).unwrap_err().contains("SECKILL_BATCH_SIZE"));
        assert!(with(&["--batch-size", "10001"]).is_err());
        assert!(with(&["--claim-idle-ms", "0"]).unwrap_err().contains("SECKILL_CLAIM_IDLE_MS"));
        assert!(with(&["--max-deliveries", "0"]).is_err());
        assert!(with(&["--redis-namespace", "a{b}"]).is_err());
        assert!(with(&["--page-cache-ms", "0"]).is_ok(), "0 turns the shared page off");
        assert!(with(&["--page-cache-ms", "60001"]).unwrap_err().contains("SECKILL_PAGE_CACHE_MS"));
        assert!(with(&["--batch-size", "-1"]).is_err(), "clap refuses what does not parse");
        assert!(with(&["--threads", "0"]).unwrap_err().contains("SECKILL_THREADS"));
        assert_eq!(with(&["--threads", "3"]).unwrap().serving_threads(), 3);
        assert!(with(&[]).unwrap().serving_threads() >= 1, "one per core by default");
    }

    /// The settings are listed here, in their attributes; the operations guide
    /// (`docs/operations.md`, "Settings") lists them again for people, and may not
    /// drift: every setting has its row there, with its default, and the table names no
    /// setting that is gone.
    #[test]
    fn the_cap_of_grabs_in_flight_grows_with_the_serving_threads() {
        let with = |threads: usize, cap: Option<usize>| {
            let mut c = Config::defaults();
            (c.threads, c.max_grabs_in_flight) = (Some(threads), cap);
            c.grabs_in_flight()
        };
        assert_eq!((with(1, None), with(2, None), with(16, None)), (256, 256, 2048));
        assert_eq!(with(16, Some(4)), 4, "as set");
    }

    #[test]
    fn the_guide_lists_every_setting_with_its_default() {
        use clap::CommandFactory;
        let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md")).unwrap();
        let row = |name: &str| guide.lines().find(|l| l.starts_with(&format!("| `{name}` ")));
        let command = Config::command();
        let settings: Vec<(String, String)> = command
            .get_arguments()
            .filter_map(|arg| {
                let name = arg.get_env()?.to_str()?.to_owned();
                let default =
                    arg.get_default_values().first().map_or(String::new(), |v| v.to_string_lossy().into_owned());
                Some((name, default))
            })
            .collect();
        assert!(settings.len() > 40, "{} settings", settings.len());
        for (name, default) in &settings {
            let row = row(name).unwrap_or_else(|| panic!("docs/operations.md has no row for {name}"));
            let given = row.split(" | ").nth(1).unwrap_or_default();
            assert!(default.is_empty() || given.contains(&format!("`{default}`")), "{name}: the guide says {given}");
        }
        let rows = guide.lines().filter_map(|l| l.strip_prefix("| `")?.split('`').next());
        for name in rows.filter(|n| n.chars().all(|c| c.is_ascii_uppercase() || c == '_') && n.contains('_')) {
            let known = name == "RUST_LOG" || settings.iter().any(|(n, _)| n == name);
            assert!(known, "docs/operations.md lists {name}, which is no setting");
        }
    }
}
