//! Start-up and the HTTP server: the wiring of every part (stores, the bus and its
//! subscribers, background tasks, router, serving runtimes). [`serve`] takes its
//! listener and a shutdown future from the caller, so tests bind `127.0.0.1:0` and
//! run the real thing.

pub mod access;
mod api_guard;
pub mod child;
pub mod cli;
pub mod database;
mod http;
pub mod idempotency;
mod in_flight;
pub mod local_redis;
pub mod monitoring;
pub mod openapi;
pub mod page_cache;
mod rate_limit;
pub mod refusals;
mod runtimes;
pub mod site;
/// The log filter the binary installs (see `backend::outage`).
pub use crate::backend::outage::ClientLogs;
mod starting;
mod state;

use crate::{
    app::{shell, App, ShopStylesheet},
    auth::{
        ended_sessions,
        jwt::ShopLogin,
        operators,
        password::{self, Cost, Hasher},
        Secrets,
    },
    backend::{layout::sale_changes, outage::Outage, Backend, BackendError, RedisConn, RedisTarget, Replicas},
    bus,
    config::Config,
    live::{sampler, sse},
    orders::sweeper,
    sale::{self, warm},
    shutdown,
    worker::{self, NameLease, Wakeups, WorkerSettings},
};
use axum::{
    routing::{any, get},
    Router,
};
use leptos::config::LeptosOptions;
use leptos_axum::{generate_route_list_with_exclusions, LeptosRoutes};
use local_redis::LocalRedis;
use state::AppState;
use std::{future::Future, path::Path, sync::Arc, time::Duration};
use tokio::net::TcpListener;

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("http: {0}")]
    Io(#[from] std::io::Error),
}

impl From<redis::RedisError> for ServeError {
    fn from(e: redis::RedisError) -> Self {
        Self::Backend(e.into())
    }
}

impl From<sqlx::Error> for ServeError {
    fn from(e: sqlx::Error) -> Self {
        Self::Backend(e.into())
    }
}

/// Runs the app on `listener` until `signal` resolves: Redis (a private one when
/// `REDIS_URL` is unset), database and migrations, warm-up, worker, HTTP.
pub async fn serve(
    config: Config,
    leptos_options: LeptosOptions,
    listener: TcpListener,
    signal: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let config = config.check().map_err(ServeError::Config)?;
    monitoring::recorder();
    let local_redis = match &config.redis_url {
        Some(_) => None,
        None => Some(LocalRedis::start(Path::new("data")).await.map_err(ServeError::Config)?),
    };
    let redis_url = config.redis_url.clone().or_else(|| local_redis.as_ref().map(|r| r.url.clone()));
    let result = run(config, redis_url.unwrap_or_default(), leptos_options, listener, signal).await;
    if let Some(redis) = local_redis {
        redis.stop().await;
    }
    result
}

async fn run(
    config: Config,
    redis_url: String,
    leptos_options: LeptosOptions,
    listener: TcpListener,
    signal: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    crate::money::set_currency(&config.currency);
    // One signal stops everything: the wait for the stores, HTTP (after open feeds
    // end), worker, sampler, events.
    let (trigger, shutdown) = shutdown::channel();
    let trigger = Arc::new(trigger);
    let on_signal = trigger.clone();
    tokio::spawn(async move {
        signal.await;
        on_signal.fire();
    });
    let stores = || open_stores(&config, &redis_url);
    let stores = starting::answer_while(&listener, when_ready("the stores", &shutdown, stores)).await?;
    let Some((target, backend, warmed)) = stores else { return Ok(()) };
    let (admin_token, generated) = match config.admin_token.clone() {
        Some(t) => (t, false),
        None => (random_token(), true),
    };
    let secure = config.secure_cookies.unwrap_or(!listener.local_addr()?.ip().is_loopback());
    let secrets =
        Secrets::new(config.session_secret.as_deref(), admin_token.clone(), secure).map_err(ServeError::Config)?;
    // Sessions ended before this process started are refused from its first request,
    // and so are the cookies of operators removed or signed out before it started.
    // So are the costs of stored password hashes, which unknown names answer at.
    let cost = cost(&config);
    let catch_up = || async {
        secrets.ended.catch_up(&backend.db).await?;
        secrets.operators.catch_up(&backend.db).await?;
        Ok(password::decoy_cost(&backend.db, cost).await?)
    };
    let caught_up = when_ready("ended sessions, operators and password costs", &shutdown, catch_up);
    let Some(decoy_cost) = starting::answer_while(&listener, caught_up).await? else { return Ok(()) };
    let (state, page_changes, wakeups) =
        state::assemble(&config, (backend.clone(), secrets, decoy_cost), leptos_options, shutdown.clone())?;
    let limits = Arc::new(
        rate_limit::Limits::new(
            config.rate_per_session,
            config.rate_per_address,
            config.trusted_proxy,
            state.accounts.secrets.clone(),
        )
        .with_shop_login(state.accounts.shop_login.clone()),
    );
    let links =
        starting::answer_while(&listener, when_ready("connections", &shutdown, || connect(&config, &state, &target)))
            .await?;
    let Some(links) = links else { return Ok(()) };
    // The worker's name, held before anything works under it.
    let worker = match links.worker.is_some() {
        false => None,
        true => match worker_name(&config, &backend, &listener, &shutdown).await? {
            None => return Ok(()),
            held => held,
        },
    };
    let tasks = spawn_background(&config, &state, (links, worker), &limits, wakeups);

    let request_timeout = Duration::from_millis(config.request_timeout_ms);
    let shop_page = page_cache::PageCache::new(Duration::from_millis(config.page_cache_ms), page_changes);
    let guard = Arc::new(
        api_guard::Guard::new(
            limits,
            (config.max_requests, config.rate_per_address),
            request_timeout,
            shop_page,
            (backend.clone(), state.report.tally.clone()),
            state.accounts.secrets.clone(),
            state.accounts.shop_login.clone(),
        )
        .serving_site(state.leptos_options.site_pkg_dir_route_base()),
    );
    let serving = Arc::new(runtimes::Serving {
        target: target.clone(),
        build: {
            let (state, guard) = (state.clone(), guard.clone());
            Arc::new(move |redis| router(state.with_backend(state.backend.with_redis(redis)), guard.clone()))
        },
        header_timeout: Duration::from_millis(config.header_timeout_ms),
        grace: STOP_GRACE,
        stop: shutdown.clone(),
    });
    let threads = config.serving_threads();
    let runtimes = runtimes::Runtimes::start(threads - 1, &serving).await?;

    println!(
        "Seckill listening on http://{} ({warmed} live vouchers warmed; {threads} serving threads)",
        listener.local_addr()?
    );
    if generated {
        println!("Admin token (generated for this run): {admin_token}");
    }
    // This runtime serves on the connection its background tasks share.
    tokio::spawn(crate::sale::batches::mailbox());
    let own = http::Connections::new((serving.build)(state.backend.redis.clone()), serving.header_timeout);
    http::accept(listener, own, runtimes.handoff.clone(), serving.grace, shutdown.wait()).await;
    // Also when serving failed: the background tasks must stop either way. Each
    // finishes the step in hand (a worker acknowledges the batch it persisted).
    trigger.fire();
    let stopped = tokio::time::timeout(STOP_GRACE, futures::future::join_all(tasks)).await;
    if stopped.is_err() {
        tracing::warn!("background tasks still busy {STOP_GRACE:?} after the stop signal; leaving them");
    }
    runtimes.finish().await;
    // Every request has been answered: what was counted for the sales' reports while
    // serving drained goes in too.
    if let Err(e) = state.report.tally.flush(&backend.db).await {
        tracing::warn!("report tally: the last flush failed: {e}");
    }
    Ok(())
}

/// The worker's name, held (a lease in Redis) before anything works under it: `None`
/// when the server was stopped while waiting for it; another running process working
/// under it stops the start.
///
/// A name the operator gave is asked for again with the same token until its node
/// answers (a take whose answer was lost is then known as this process's own). A name
/// of the process's own making whose lease's node does not answer (a cluster master
/// down) is dropped for another drawn afresh, most likely in another slot: nobody
/// else uses it, and a take of it whose answer was lost lapses by itself. Before, such a process waited for the
/// master's failover, or for ever without a replica.
async fn worker_name(
    config: &Config,
    backend: &Backend,
    listener: &TcpListener,
    shutdown: &shutdown::Shutdown,
) -> Result<Option<(NameLease, WorkerSettings)>, ServeError> {
    let named = |settings: WorkerSettings| (NameLease::new(backend, &settings.consumer), settings);
    let chosen = std::sync::Mutex::new(named(worker_settings(config)));
    let take = || async {
        let (lease, settings) = chosen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let taken = lease.take().await;
        if taken.is_err() && config.worker_name.is_none() {
            *chosen.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = named(worker_settings(config));
        }
        Ok::<_, ServeError>((taken?, lease, settings))
    };
    match starting::answer_while(listener, when_ready("the worker's name", shutdown, take)).await? {
        None => Ok(None),
        Some((false, _, settings)) => Err(ServeError::Config(format!(
            "SECKILL_WORKER_NAME {}: another running process works under this name; give each its own",
            settings.consumer
        ))),
        Some((true, lease, settings)) => Ok(Some((lease, settings))),
    }
}

/// First pause before a start-up step is tried again; it doubles up to
/// [`MAX_START_PAUSE`].
const FIRST_START_PAUSE: Duration = Duration::from_millis(100);
const MAX_START_PAUSE: Duration = Duration::from_secs(5);

/// A start-up step (the stores opened and checked, what is read from them, the
/// connections made), waited for while the stores do not answer (Redis loading its
/// file or failing over, the database not up yet, a link resetting connections): tried
/// again after a pause that doubles from 100 ms to 5 s, logged when the wait starts and
/// every 30 s. Any other error ends the start. `None` when the server was stopped
/// meanwhile. Every step is safe to run again.
async fn when_ready<T, F, Fut>(what: &str, shutdown: &shutdown::Shutdown, mut step: F) -> Result<Option<T>, ServeError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ServeError>>,
{
    let (mut pause, mut outage) = (FIRST_START_PAUSE, Outage::default());
    loop {
        match step().await {
            Ok(done) => {
                outage.ended(&format_args!("start-up: {what}"));
                return Ok(Some(done));
            }
            Err(ServeError::Backend(e)) => outage.failed(&format_args!("start-up: waiting for {what}"), &e),
            Err(e) => return Err(e),
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.wait() => return Ok(None),
        }
        pause = (pause * 2).min(MAX_START_PAUSE);
    }
}

/// How long the start waits for the answer to whether Redis holds sales the database
/// has not made (`warm::from_a_later_database`).
const RESTORE_CHECK: Duration = Duration::from_secs(2);

/// The database (migrated) and Redis (which must not evict), and every live sale
/// warmed; how many.
async fn open_stores(config: &Config, redis_url: &str) -> Result<(Arc<RedisTarget>, Backend, usize), ServeError> {
    let db = database::open(&config.database_url, Duration::from_millis(config.db_busy_ms)).await?;
    database::migrate(&db, &config.database_url).await?;
    let target = Arc::new(RedisTarget::open(redis_url)?);
    let redis = target.connect().await?;
    let evicting = target.evicting_nodes().await;
    if !evicting.is_empty() {
        return Err(ServeError::Config(format!(
            "Redis may evict a sale's keys one by one under memory pressure ({}): set \
             maxmemory-policy noeviction (a full Redis then refuses grabs, and nothing is lost)",
            evicting.join("; ")
        )));
    }
    let replicas = Replicas { want: config.wait_replicas, wait_ms: config.wait_replicas_ms };
    let mut backend = Backend::new(db, redis, &config.redis_namespace).with_replicas(replicas);
    // Not answered (a cluster node down): looked at by the next start. One node down
    // must not keep every process from starting (as below).
    let asked = tokio::time::timeout(RESTORE_CHECK, warm::from_a_later_database(&backend)).await;
    let later = asked.map_err(|_| "no answer".to_owned()).and_then(|a| a.map_err(|e| e.to_string()));
    let later = later.unwrap_or_else(|e| {
        tracing::warn!("start-up: could not ask Redis whether it holds sales this database has not made: {e}");
        None
    });
    if let Some(id) = later {
        return Err(ServeError::Config(format!(
            "Redis has held sale {id}, which this database has not made: the database is older than \
             Redis's keys (restored from a backup?), and its next sales would take over theirs. Stop every process, \
             delete every key under the namespace `{}` in Redis (every sale is rebuilt from the database) \
             and start again: docs/operations.md, \"Restoring the database\"",
            config.redis_namespace
        )));
    }
    if replicas.want > 0 {
        backend = backend.with_waits(target.connect().await?, target.connect().await?);
    }
    let (warmed, failed) = warm::warm_all(&backend).await?;
    if let Some(e) = failed {
        // Redis answers, though not for every sale (a cluster master down): start, and
        // leave those sales to their workers' readers, which warm their bucket as
        // they join, and to grabs, which rebuild a sale Redis does not hold. One node
        // down must not keep every process from starting. Nothing answering (Redis
        // down, or loading its file) is waited for.
        if !target.answers().await {
            return Err(e.into());
        }
        tracing::warn!("start-up: a live sale could not be warmed ({e}); its readers warm it once its node answers");
    }
    Ok((target, backend, warmed))
}

/// The cost new password hashes are made at.
fn cost(config: &Config) -> Cost {
    Cost { memory_kib: config.password_memory_kib, iterations: config.password_iterations }
}

/// The password hasher at the configured cost; a cost below OWASP's is for tests, and
/// says so.
fn hasher(config: &Config) -> Result<Hasher, ServeError> {
    let cost = cost(config);
    if cost.memory_kib < Cost::OWASP.memory_kib || cost.iterations < Cost::OWASP.iterations {
        tracing::warn!(?cost, "password hashes below OWASP's cost (19 MiB, 2 passes): for tests only");
    }
    Hasher::new(cost, config.hash_threads(), config.hash_queue).map_err(ServeError::Config)
}

/// The shop's own login, when its settings are given.
fn shop_login(config: &Config) -> Result<Option<ShopLogin>, ServeError> {
    let (Some(issuer), Some(audience), Some(keys)) = (&config.jwt_issuer, &config.jwt_audience, &config.jwt_keys)
    else {
        return Ok(None);
    };
    ShopLogin::load(issuer, audience, keys).map(Some).map_err(ServeError::Config)
}

/// The connections of the background tasks that need ones of their own (Redis's, and
/// the database's for the followers of revocations), and the bus's listener
/// (subscribed last: a failure before leaves nothing running).
struct Links {
    sweeper: RedisConn,
    worker: Option<RedisConn>,
    followers: crate::backend::Db,
    bus: tokio::task::JoinHandle<()>,
}

async fn connect(config: &Config, state: &AppState, target: &Arc<RedisTarget>) -> Result<Links, ServeError> {
    let sweeper = target.connect().await?;
    let worker = if config.worker { Some(target.connect().await?) } else { None };
    let followers = database::open_followers(&config.database_url, Duration::from_millis(config.db_busy_ms)).await?;
    let channel = state.backend.events_channel.to_string();
    let bus = bus::listen(target.clone(), channel, state.bus.clone(), state.shutdown.clone()).await?;
    Ok(Links { sweeper, worker, followers, bus })
}

/// The tasks that run beside HTTP until shutdown: the bus's listener and the follower
/// of the sale-change count, the live sampler, the rate limits' clean-up, the metrics'
/// upkeep, the sweeper of unpaid orders, the sale's upkeep (owed stock changes, windows
/// to push), the followers of ended sessions and of operators, the keying of older
/// names, the flusher of the report's counts and the
/// worker (unless turned off).
fn spawn_background(
    config: &Config,
    state: &AppState,
    (links, worker): (Links, Option<(NameLease, WorkerSettings)>),
    limits: &Arc<rate_limit::Limits>,
    wakeups: Arc<Wakeups>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let (backend, shutdown) = (&state.backend, &state.shutdown);
    let mut tasks = vec![
        links.bus,
        bus::follow(backend.redis.clone(), sale_changes(&backend.namespace), state.bus.clone(), shutdown.clone()),
        sampler::spawn(
            backend.clone(),
            state.live.hub.clone(),
            (state.sale.sold_out.clone(), state.sale.admission.clone()),
            shutdown.clone(),
        ),
        forget_idle_callers(limits.clone(), shutdown.clone()),
        monitoring::spawn_upkeep(shutdown.clone()),
        // On a connection of its own: it waits for replicas (`WAIT` holds a connection up).
        sweeper::spawn(backend.with_redis(links.sweeper), Duration::from_millis(config.sweep_ms), shutdown.clone()),
        sale::upkeep::spawn(backend.clone(), Duration::from_millis(config.sweep_ms), shutdown.clone()),
        ended_sessions::follow(state.accounts.secrets.ended.clone(), links.followers.clone(), shutdown.clone()),
        operators::follow(state.accounts.secrets.operators.clone(), links.followers, shutdown.clone()),
        crate::auth::names::follow(backend.db.clone(), shutdown.clone()),
        crate::report::tally::spawn(state.report.tally.clone(), backend.db.clone(), shutdown.clone()),
    ];
    if let (Some(redis), Some((lease, mut settings))) = (links.worker, worker) {
        settings.named = lease.held();
        let backend = backend.clone();
        tasks.push(lease.keep(shutdown.clone(), move |stop| worker::spawn(backend, redis, wakeups, settings, stop)));
    }
    tasks
}

/// The pages' routes, worked out once per process and the same for every server in it
/// (the hottest endpoints skip the server-function layer: `sale::hot_path`). Once,
/// because working them out runs the app with resources held back by a flag that is
/// the whole process's (`leptos_server`'s `SuppressResourceLoad`, leptos#4773): a page
/// that another server in the process rendered meanwhile waited on its resources
/// forever. The tests start servers side by side, and their pages hung until the
/// request timeout (30 s), one run in about fifteen on a loaded machine.
fn page_routes() -> Vec<leptos_axum::AxumRouteListing> {
    static ROUTES: std::sync::OnceLock<Vec<leptos_axum::AxumRouteListing>> = std::sync::OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list_with_exclusions(App, Some(sale::hot_path::paths()))).clone()
}

/// How long a stop waits for requests in flight, and then for background tasks.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The routes: pages, the `/api/...` server functions, static files, the live feed,
/// all behind the front door (`api_guard::front`: metrics, rate limits, the request
/// cap and timeout, API rules).
fn router(state: AppState, guard: Arc<api_guard::Guard>) -> Router {
    let routes = page_routes();
    let options = state.leptos_options.clone();
    let stylesheet = site::stylesheet(&options).map(ShopStylesheet);
    Router::new()
        .merge(monitoring::routes())
        .merge(openapi::routes())
        .route(crate::live::FEED_PATH, get(sse::live))
        .route("/api/{*rest}", any(api_guard::not_found))
        .merge(sale::hot_path::routes())
        .merge(crate::orders::export::routes())
        .merge(crate::report::api::routes())
        .leptos_routes_with_context(
            &state,
            routes,
            {
                let state = state.clone();
                move || state.contexts()
            },
            {
                let options = options.clone();
                move || {
                    if let Some(stylesheet) = &stylesheet {
                        leptos::prelude::provide_context(stylesheet.clone());
                    }
                    shell(options.clone())
                }
            },
        )
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        .layer(axum::middleware::from_fn_with_state(guard, api_guard::front))
        .with_state(state)
}

/// Every minute, rate limits forget callers that went quiet.
fn forget_idle_callers(limits: Arc<rate_limit::Limits>, shutdown: shutdown::Shutdown) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut minutes = shutdown::interval(Duration::from_secs(60));
        while shutdown.tick(&mut minutes).await {
            limits.forget_idle();
        }
    })
}

fn worker_settings(config: &Config) -> WorkerSettings {
    WorkerSettings {
        consumer: config.worker_name.clone().unwrap_or_else(|| format!("worker-{}", &random_token()[..12])),
        named: Arc::new(std::sync::atomic::AtomicBool::new(true)),
        batch_size: config.batch_size,
        poll_ms: config.poll_ms,
        claim_idle_ms: config.claim_idle_ms,
        max_deliveries: config.max_deliveries,
        // `check` keeps it within 30 days.
        pay_timeout_ms: config.pay_timeout_ms as i64,
    }
}

/// 32 random bytes as hex.
fn random_token() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}
