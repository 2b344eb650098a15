//! The HTTP accept loop and the connections' serving. `axum::serve` runs hyper without
//! a timer, so a client that never finishes its headers (or a kept-alive connection
//! left idle) would hold a socket forever. This is the same on hyper-util with a timer:
//! headers must arrive within the header timeout, sockets are `TCP_NODELAY` (a page
//! streamed in several writes must not wait on a delayed ACK), and a stop lets requests
//! in flight finish for a bounded grace.
//!
//! One runtime accepts and hands the connections to the serving threads in turn
//! (`server::runtimes`), itself included: each thread then serves its connections to
//! their end. Left to race for the listening socket, the idlest thread took most of
//! them, and its queue set the storm's p99 (`src/bin/bench/history.md`).

use axum::{
    body::Body,
    extract::{connect_info::IntoMakeServiceWithConnectInfo, Request},
    Router,
};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto::Builder, graceful::GracefulShutdown},
    service::TowerToHyperService,
};
use std::{future::Future, net::SocketAddr, time::Duration};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::mpsc,
};
use tower::{Service, ServiceExt};

/// An accepted connection on its way to another serving thread. It leaves the
/// accepting runtime's reactor, to be driven by the one that serves it.
pub type Handed = (std::net::TcpStream, SocketAddr);

/// The connections one runtime serves.
pub struct Connections {
    make: IntoMakeServiceWithConnectInfo<Router, SocketAddr>,
    builder: Builder<TokioExecutor>,
    graceful: GracefulShutdown,
}

impl Connections {
    pub fn new(app: Router, header_timeout: Duration) -> Self {
        // HTTP/1 only, and no upgrades: sniffing for HTTP/2 would wait on a silent
        // client with no timer running. (A TLS proxy in front speaks HTTP/2 to browsers.)
        let mut builder = Builder::new(TokioExecutor::new()).http1_only();
        builder.http1().timer(TokioTimer::new()).header_read_timeout(header_timeout);
        let make = app.into_make_service_with_connect_info::<SocketAddr>();
        Self { make, builder, graceful: GracefulShutdown::new() }
    }

    /// Serves `stream` on this runtime until the client or the stop closes it.
    async fn serve(&mut self, stream: TcpStream, addr: SocketAddr) {
        let service = self.make.call(addr).await.unwrap_or_else(|never| match never {});
        let service = TowerToHyperService::new(service.map_request(|req: Request<Incoming>| req.map(Body::new)));
        let connection = self.builder.serve_connection(TokioIo::new(stream), service).into_owned();
        let connection = self.graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("connection from {addr}: {e}");
            }
        });
    }

    /// Waits up to `grace` for the requests in flight, then closes what is left.
    async fn close(self, grace: Duration) {
        if tokio::time::timeout(grace, self.graceful.shutdown()).await.is_err() {
            tracing::warn!("requests still open {grace:?} after the stop signal; closing them");
        }
    }
}

/// Accepts on `listener` until `stop` resolves, handing the connections in turn to
/// `others` and to `own` (served here); then closes `own` (see [`Connections::close`]).
pub async fn accept(
    listener: TcpListener,
    mut own: Connections,
    others: Vec<mpsc::UnboundedSender<Handed>>,
    grace: Duration,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    let mut turn = 0usize;
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
        turn = (turn + 1) % (others.len() + 1);
        match others.get(turn) {
            None => own.serve(stream, addr).await,
            Some(other) => match stream.into_std().map(|stream| other.send((stream, addr))) {
                Ok(Ok(())) => {}
                // That thread is gone (it panicked): this one serves its share.
                Ok(Err(mpsc::error::SendError((stream, addr)))) => match TcpStream::from_std(stream) {
                    Ok(stream) => own.serve(stream, addr).await,
                    Err(e) => tracing::debug!("taking a connection back: {e}"),
                },
                Err(e) => tracing::debug!("handing a connection over: {e}"),
            },
        }
    }
    drop(listener);
    own.close(grace).await;
}

/// Serves the connections handed to this runtime until `stop` resolves; then closes
/// them (see [`Connections::close`]).
pub async fn serve_handed(
    mut handed: mpsc::UnboundedReceiver<Handed>,
    mut own: Connections,
    grace: Duration,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    loop {
        let (stream, addr) = tokio::select! {
            next = handed.recv() => match next {
                Some(next) => next,
                None => break,
            },
            () = &mut stop => break,
        };
        match TcpStream::from_std(stream) {
            Ok(stream) => own.serve(stream, addr).await,
            Err(e) => tracing::debug!("taking a connection over: {e}"),
        }
    }
    own.close(grace).await;
}
