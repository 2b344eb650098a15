//! A lean HTTP/1.1 load client for the storms and the page rate. The load tool shares
//! the machine with the server and Redis; a heavy client would eat the CPU the figures
//! are about (the issue's own `wrk` rows were 1.6× those of a `reqwest` client).
//! `redis-benchmark`, the raw gate's client, is lean, so the ratio compares servers.
//! - Storms: like `wrk`, each kept-alive connection writes its request's bytes and
//!   parses the answer's head with `httparse`, in the storm's own task: no connection
//!   task, no channel, no header map per call.
//! - Pages (answers streamed in chunks) and one-off calls: hyper's bare client
//!   connection (no pool, no cookie store, no redirects).

use http_body_util::{BodyExt, Full};
use hyper::{
    body::Bytes,
    client::conn::http1::{self, SendRequest},
    header::{HeaderValue, CONTENT_TYPE, COOKIE, HOST},
    Method, Request, StatusCode,
};
use hyper_util::rt::TokioIo;
use std::{
    io::Write as _,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// One kept-alive connection to one server.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: HeaderValue,
}

impl Conn {
    /// Connects to `base` (`http://host:port`).
    pub async fn open(base: &str) -> Result<Self, String> {
        let authority = base.trim_start_matches("http://").trim_end_matches('/');
        let stream = TcpStream::connect(authority).await.map_err(|e| format!("connecting {base}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (sender, connection) =
            http1::handshake(TokioIo::new(stream)).await.map_err(|e| format!("connecting {base}: {e}"))?;
        tokio::spawn(connection);
        let host = HeaderValue::from_str(authority).map_err(|e| e.to_string())?;
        Ok(Self { sender, host })
    }

    /// Sends one request and reads the whole answer.
    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        cookie: Option<&HeaderValue>,
        json: Option<Bytes>,
    ) -> Result<(StatusCode, Bytes), String> {
        let mut req = Request::builder().method(method).uri(path).header(HOST, &self.host);
        if let Some(cookie) = cookie {
            req = req.header(COOKIE, cookie);
        }
        if json.is_some() {
            req = req.header(CONTENT_TYPE, "application/json");
        }
        let req = req.body(Full::new(json.unwrap_or_default())).map_err(|e| e.to_string())?;
        self.sender.ready().await.map_err(|e| format!("{path}: {e}"))?;
        let res = self.sender.send_request(req).await.map_err(|e| format!("{path}: {e}"))?;
        let status = res.status();
        let body = res.into_body().collect().await.map_err(|e| format!("{path}: {e}"))?.to_bytes();
        Ok((status, body))
    }
}

/// One POST of a storm: whose it is, its session cookie and its JSON body.
#[derive(Clone)]
pub struct Call {
    pub user_id: i64,
    pub cookie: HeaderValue,
    pub body: Bytes,
}

/// One answer of a storm.
pub struct Answer {
    pub user_id: i64,
    pub status: StatusCode,
    pub body: Bytes,
    pub took: Duration,
    /// Times the call was shed (503) and sent again before this answer.
    pub shed: u32,
}

/// Times a shed call is sent again, as the page does, before its 503 stands.
pub const SHED_RETRIES: u32 = 4;

/// POSTs every call to `path` once, over `connections` kept-alive connections spread
/// over `servers` in turn; each connection takes the next call as soon as it is free.
/// With `retry_shed`, a call the server shed (503, `Retry-After: 1`) is sent again on
/// its connection as the page does: after that second, doubling each time, each plus
/// a random share as long, up to [`SHED_RETRIES`] times. Returns the answers (each
/// call's last) and when the first call went out (after the connections opened). A
/// connection the server drops fails the storm: the load tool does not retry a grab
/// whose answer it lost.
///
/// The connections are shared out over [`threads`] threads, each a runtime of its own
/// (one, this one, unless `--load-threads` says more): one thread's client tops out
/// below what a many-core server answers.
pub async fn storm(
    servers: &[String],
    connections: usize,
    path: &str,
    calls: &[Call],
    retry_shed: bool,
) -> Result<(Vec<Answer>, Instant), String> {
    let connections = connections.min(calls.len()).max(1);
    let threads = threads().min(connections);
    if threads <= 1 {
        let opened = open_raw(servers, 0..connections).await?;
        let started = Instant::now();
        return Ok((run_connections(opened, calls, &AtomicUsize::new(0), path, retry_shed).await?, started));
    }
    let (servers, path): (Arc<[String]>, Arc<str>) = (servers.into(), path.into());
    let calls: Arc<[Call]> = calls.to_vec().into();
    let next = Arc::new(AtomicUsize::new(0));
    let ready = Arc::new(std::sync::Barrier::new(threads));
    let mut waits = Vec::with_capacity(threads);
    for t in 0..threads {
        let (servers, path, calls, next, ready) =
            (servers.clone(), path.clone(), calls.clone(), next.clone(), ready.clone());
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            let result = runtime.map_err(|e| e.to_string()).and_then(|rt| {
                rt.block_on(async {
                    // Connection i goes to thread i % threads, and to server i % servers.
                    let opened = open_raw(&servers, (t..connections).step_by(threads)).await;
                    ready.wait(); // every thread waits, so none hangs on a failed one
                    let started = Instant::now();
                    Ok((run_connections(opened?, &calls, &next, &path, retry_shed).await?, started))
                })
            });
            let _ = tx.send(result);
        });
        waits.push(rx);
    }
    let (mut answers, mut first) = (Vec::with_capacity(calls.len()), None::<Instant>);
    for wait in waits {
        let (some, started) = wait.await.map_err(|_| "a load thread panicked".to_owned())??;
        answers.extend(some);
        first = Some(first.map_or(started, |f| f.min(started)));
    }
    Ok((answers, first.unwrap_or_else(Instant::now)))
}

/// Threads the storms' client runs on (`--load-threads`); set once, before the first.
static THREADS: AtomicUsize = AtomicUsize::new(1);

pub fn set_threads(n: usize) {
    THREADS.store(n.max(1), Ordering::Relaxed);
}

fn threads() -> usize {
    THREADS.load(Ordering::Relaxed)
}

/// Opens the connections numbered `which`, each to server `i % servers`.
async fn open_raw(servers: &[String], which: impl Iterator<Item = usize>) -> Result<Vec<RawConn>, String> {
    let mut opened = Vec::new();
    for i in which {
        opened.push(RawConn::open(&servers[i % servers.len()]).await?);
    }
    Ok(opened)
}

/// Each connection takes the next call (`next`, shared) until none is left.
async fn run_connections(
    opened: Vec<RawConn>,
    calls: &[Call],
    next: &AtomicUsize,
    path: &str,
    retry_shed: bool,
) -> Result<Vec<Answer>, String> {
    let per_connection = opened.into_iter().map(|mut conn| async move {
        let mut answers = Vec::new();
        loop {
            let Some(call) = calls.get(next.fetch_add(1, Ordering::Relaxed)) else { return Ok(answers) };
            let mut shed = 0;
            loop {
                let started = Instant::now();
                let (status, body) = conn.post(path, call).await?;
                let took = started.elapsed();
                if retry_shed && status == StatusCode::SERVICE_UNAVAILABLE && shed < SHED_RETRIES {
                    let wait = 1000 << shed;
                    tokio::time::sleep(Duration::from_millis(wait + rand::random::<u64>() % wait)).await;
                    shed += 1;
                    continue;
                }
                answers.push(Answer { user_id: call.user_id, status, body, took, shed });
                break;
            }
        }
    });
    let answers: Vec<Result<Vec<Answer>, String>> = futures::future::join_all(per_connection).await;
    Ok(answers.into_iter().collect::<Result<Vec<_>, _>>()?.into_iter().flatten().collect())
}

/// A kept-alive connection spoken to directly: the request's bytes out, the answer's
/// head parsed in place, its body taken by `Content-Length`.
struct RawConn {
    stream: TcpStream,
    host: String,
    out: Vec<u8>,
    read: Vec<u8>,
}

impl RawConn {
    async fn open(base: &str) -> Result<Self, String> {
        let host = base.trim_start_matches("http://").trim_end_matches('/').to_owned();
        let stream = TcpStream::connect(&host).await.map_err(|e| format!("connecting {base}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(Self { stream, host, out: Vec::with_capacity(1024), read: Vec::with_capacity(4096) })
    }

    async fn post(&mut self, path: &str, call: &Call) -> Result<(StatusCode, Bytes), String> {
        let err = |e: std::io::Error| format!("{path}: {e}");
        self.out.clear();
        let (cookie, length) = (call.cookie.as_bytes(), call.body.len());
        write!(self.out, "POST {path} HTTP/1.1\r\nHost: {}\r\nCookie: ", self.host).map_err(err)?;
        self.out.extend_from_slice(cookie);
        write!(self.out, "\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n").map_err(err)?;
        self.out.extend_from_slice(&call.body);
        self.stream.write_all(&self.out).await.map_err(err)?;
        loop {
            if let Some(answer) = self.take_answer().map_err(|e| format!("{path}: {e}"))? {
                return Ok(answer);
            }
            if self.stream.read_buf(&mut self.read).await.map_err(err)? == 0 {
                return Err(format!("{path}: the server closed the connection"));
            }
        }
    }

    /// The first whole answer in the read buffer, taken out of it; `None` until it
    /// has all arrived.
    fn take_answer(&mut self) -> Result<Option<(StatusCode, Bytes)>, String> {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut head = httparse::Response::new(&mut headers);
        let httparse::Status::Complete(head_len) = head.parse(&self.read).map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        let status = StatusCode::from_u16(head.code.unwrap_or(0)).map_err(|e| e.to_string())?;
        let length = head
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse::<usize>().ok())
            .ok_or("an answer without Content-Length (the storm client reads only those)")?;
        if self.read.len() < head_len + length {
            return Ok(None);
        }
        let body = Bytes::copy_from_slice(&self.read[head_len..head_len + length]);
        self.read.drain(..head_len + length);
        Ok(Some((status, body)))
    }
}

/// GETs `path` over `connections` kept-alive connections for `window`: the answers
/// that were 200, and the time they took.
pub async fn pages(
    servers: &[String],
    connections: usize,
    path: &str,
    window: Duration,
) -> Result<(usize, Duration), String> {
    let opened = open_all(servers, connections).await?;
    let started = Instant::now();
    let per_connection = opened.into_iter().map(|mut conn| async move {
        let mut served = 0;
        while started.elapsed() < window {
            let (status, _) = conn.send(Method::GET, path, None, None).await?;
            served += usize::from(status == StatusCode::OK);
        }
        Ok::<_, String>(served)
    });
    let served: Vec<Result<usize, String>> = futures::future::join_all(per_connection).await;
    Ok((served.into_iter().sum::<Result<usize, String>>()?, started.elapsed()))
}

/// Opens `n` connections, spread over `servers` in turn.
async fn open_all(servers: &[String], n: usize) -> Result<Vec<Conn>, String> {
    let mut opened = Vec::with_capacity(n);
    for i in 0..n {
        opened.push(Conn::open(&servers[i % servers.len()]).await?);
    }
    Ok(opened)
}
