//! What the server answers on its address while it waits for its stores at start-up
//! (Redis loading its file or failing over, the database not up yet, a link resetting
//! the connections the start makes after them): `/healthz` says
//! the process is alive, and every other request, `/readyz` included, is refused
//! `unavailable` with `Retry-After: 1`, so a balancer sends it nothing yet and a
//! client tries again. Each answer closes its connection: the next request reaches the
//! real server once it is ready.

use super::monitoring::HEALTHZ;
use crate::error::{AppError, ErrorCode};
use axum::{
    body::Body,
    extract::Request,
    http::{header, HeaderValue},
    response::IntoResponse,
    routing::get,
    Json, Router,
};
use hyper::body::Incoming;
use hyper_util::{rt::TokioIo, service::TowerToHyperService};
use std::future::Future;
use tokio::net::TcpListener;
use tower::ServiceExt;

/// Runs `work` (the start-up's waiting for its stores), answering on `listener`
/// meanwhile; returns what `work` returns, and stops answering then.
pub async fn answer_while<T>(listener: &TcpListener, work: impl Future<Output = T>) -> T {
    let router = Router::new().route(HEALTHZ, get(|| async { Json(serde_json::json!({ "status": "ok" })) })).fallback(
        || async {
            let mut refused = AppError::new(ErrorCode::Unavailable).into_response();
            refused.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            refused
        },
    );
    tokio::pin!(work);
    loop {
        tokio::select! {
            done = &mut work => return done,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let service = router.clone().map_request(|req: Request<Incoming>| req.map(Body::new));
                tokio::spawn(async move {
                    let connection = hyper::server::conn::http1::Builder::new()
                        .keep_alive(false)
                        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
                    let _ = connection.await;
                });
            }
        }
    }
}
