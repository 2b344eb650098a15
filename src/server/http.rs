//! The HTTP accept loop. `axum::serve` runs hyper without a timer, so a client that
//! never finishes its headers (or a kept-alive connection left idle) would hold a
//! socket forever. This is the same loop on hyper-util with a timer: headers must
//! arrive within the header timeout, sockets are `TCP_NODELAY` (a page streamed in
//! several writes must not wait on a delayed ACK), and a stop lets requests in flight
//! finish for a bounded grace.

use axum::{body::Body, extract::Request, Router};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto::Builder, graceful::GracefulShutdown},
    service::TowerToHyperService,
};
use std::{net::SocketAddr, time::Duration};
use tokio::net::TcpListener;
use tower::{Service, ServiceExt};

/// Serves `app` on `listener` until `stop` resolves; then waits up to `grace` for the
/// connections' requests in flight, and closes what is left.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    header_timeout: Duration,
    grace: Duration,
    stop: impl std::future::Future<Output = ()>,
) {
    let mut make = app.into_make_service_with_connect_info::<SocketAddr>();
    // HTTP/1 only, and no upgrades: sniffing for HTTP/2 would wait on a silent client
    // with no timer running. (A TLS proxy in front speaks HTTP/2 to browsers.)
    let mut builder = Builder::new(TokioExecutor::new()).http1_only();
    builder.http1().timer(TokioTimer::new()).header_read_timeout(header_timeout);
    let graceful = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let (stream, addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Out of file descriptors, or a connection reset before it was taken:
                // the listener is fine, and spinning on the error would not help.
                Err(e) => {
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY: {e}");
        }
        let service = make.call(addr).await.unwrap_or_else(|never| match never {});
        let service = TowerToHyperService::new(service.map_request(|req: Request<Incoming>| req.map(Body::new)));
        let connection = builder.serve_connection(TokioIo::new(stream), service).into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("connection from {addr}: {e}");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
        tracing::warn!("requests still open {grace:?} after the stop signal; closing them");
    }
}
