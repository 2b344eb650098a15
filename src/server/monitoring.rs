//! What a load balancer and a monitoring system ask of each process: `GET /healthz`
//! (the process is alive), `GET /readyz` (Redis and the database answer, migrations ran,
//! not stopping) and `GET /metrics` (Prometheus text format, admin token only: it names
//! vouchers and reveals traffic).

use crate::{
    error::{AppError, ErrorCode},
    server::state::AppState,
    shutdown::{self, Shutdown},
};
use axum::{
    extract::{Request, State},
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use metrics::{Counter, Histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde_json::json;
use std::{
    collections::{HashMap, HashSet},
    sync::OnceLock,
    time::Duration,
};

/// Upper bounds (seconds) of the latency histograms: from 100 µs to 10 s.
const LATENCY_BUCKETS: [f64; 14] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 10.0];

/// The process's metrics recorder, installed on first use (one per process: tests run
/// several servers in one process and share it).
pub fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        PrometheusBuilder::new().set_buckets(&LATENCY_BUCKETS).and_then(|b| b.install_recorder()).unwrap_or_else(|e| {
            // Another recorder is installed: metrics go there, and /metrics is empty.
            tracing::warn!("metrics: {e}");
            PrometheusBuilder::new().build_recorder().handle()
        })
    })
}

/// How often the histograms' raw samples are folded into their buckets.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Every few seconds until shutdown, folds the histograms' raw samples into their
/// buckets. The recorder keeps every sample it is given until upkeep runs (installed
/// with `install_recorder`, it runs none of its own), and a scrape is not guaranteed:
/// unscraped, a process would keep 8 bytes per timing (a grab takes two) for good.
pub fn spawn_upkeep(shutdown: Shutdown) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = shutdown::interval(UPKEEP_EVERY);
        while shutdown.tick(&mut ticks).await {
            recorder().run_upkeep();
        }
    })
}

/// The paths of the routes below, each written once: the router and the metrics read them.
pub(crate) const HEALTHZ: &str = "/healthz";
pub(crate) const READYZ: &str = "/readyz";
pub(crate) const METRICS: &str = "/metrics";

/// The routes of this module, for the app's router.
pub fn routes() -> axum::Router<AppState> {
    use axum::routing::get;
    axum::Router::new().route(HEALTHZ, get(healthz)).route(READYZ, get(readyz)).route(METRICS, get(metrics))
}

/// `GET /healthz`: answers while the process runs.
async fn healthz() -> impl IntoResponse {
    Json(json!({ "status": "ok" }))
}

/// `GET /readyz`: 200 when this process should get traffic, else 503 saying why.
async fn readyz(State(state): State<AppState>) -> Response {
    let backend = &state.backend;
    let redis = tokio::time::timeout(Duration::from_secs(1), async {
        redis::cmd("PING").query_async::<String>(&mut backend.redis.clone()).await
    });
    let database = tokio::time::timeout(Duration::from_secs(1), async {
        sqlx::query_scalar::<_, i64>("SELECT 1").fetch_one(&backend.db).await
    });
    let (redis, database) = tokio::join!(redis, database);
    let newer_layout = backend.newer_layouts.why();
    let checks = json!({
        "redis": matches!(redis, Ok(Ok(_))),
        "database": matches!(database, Ok(Ok(_))),
        // They run before the server listens: a process that answers has run them.
        "migrations": true,
        "stopping": state.shutdown.is_shutdown(),
        // No sale met in a Redis layout this build does not speak (`backend::layout_version`).
        "layout": newer_layout.is_none(),
    });
    let ready = checks["redis"] == true
        && checks["database"] == true
        && checks["stopping"] == false
        && checks["layout"] == true;
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let mut body = json!({ "ready": ready, "checks": checks });
    if let Some(why) = newer_layout {
        body["why"] = why.into();
    }
    (status, Json(body)).into_response()
}

/// `GET /metrics`: the Prometheus text format, for the admin token only (what a
/// monitoring system's scraper holds); an operator's cookie is refused.
async fn metrics(State(state): State<AppState>, request: Request) -> Response {
    // The front door admitted the admin token only (`server::access`).
    let caller = request.extensions().get::<crate::auth::caller::Caller>();
    if caller.map(|c| &c.0) != Some(&crate::auth::session::Actor::Token) {
        return AppError::new(ErrorCode::OperatorRequired).into_response();
    }
    metrics::gauge!("seckill_live_feeds").set(state.live.feeds.open() as f64);
    let handle = recorder();
    handle.run_upkeep();
    let mut text = handle.render();
    if let Some(snapshot) = state.live.hub.latest() {
        text.push_str(&crate::live::sampler::gauges(&snapshot));
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// The metrics of one route: its request times, and its answers by status class.
/// Each is registered on the route's first use of it, as `/metrics` showed them before,
/// and kept: by name and labels, every record built a key with its labels (two
/// allocations) and searched the registry with it, on every request (`src/bin/bench/history.md`).
pub(super) struct RouteMetrics {
    route: &'static str,
    seconds: OnceLock<Histogram>,
    /// 2xx, 3xx, 4xx, 5xx.
    responses: [OnceLock<Counter>; 4],
}

impl RouteMetrics {
    const CLASSES: [&'static str; 4] = ["2xx", "3xx", "4xx", "5xx"];

    fn new(route: &'static str) -> Self {
        Self { route, seconds: OnceLock::new(), responses: Default::default() }
    }

    /// Records one answered request: its time, and its status class.
    pub(super) fn record(&self, took: Duration, status: StatusCode) {
        let class = match status.as_u16() {
            200..=299 => 0,
            300..=399 => 1,
            400..=499 => 2,
            _ => 3,
        };
        let route = self.route;
        self.seconds.get_or_init(|| metrics::histogram!("seckill_http_request_seconds", "route" => route)).record(took);
        self.responses[class]
            .get_or_init(|| {
                metrics::counter!("seckill_http_responses_total", "route" => route, "status" => Self::CLASSES[class])
            })
            .increment(1);
    }
}

/// A request's route, for its metrics (the label is a server function's path, a page,
/// `static`, or `other`; never the raw path, so callers cannot grow the label set).
pub(super) fn route_metrics(path: &str) -> &'static RouteMetrics {
    static ROUTES: OnceLock<(HashMap<&'static str, RouteMetrics>, RouteMetrics, RouteMetrics)> = OnceLock::new();
    let (known, assets, other) = ROUTES.get_or_init(|| {
        // Handles taken before the recorder is installed would record nowhere.
        recorder();
        let mut paths: HashSet<&'static str> = server_fn::axum::server_fn_paths().map(|(p, _)| p).collect();
        paths.extend(["/", "/admin", crate::live::FEED_PATH, HEALTHZ, READYZ, METRICS]);
        let known = paths.into_iter().map(|p| (p, RouteMetrics::new(p))).collect();
        (known, RouteMetrics::new("static"), RouteMetrics::new("other"))
    });
    match known.get(path) {
        Some(route) => route,
        None if path.starts_with("/pkg/") => assets,
        None => other,
    }
}
