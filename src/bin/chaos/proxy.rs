//! A TCP proxy on loopback in front of one store (or one Redis node's client or bus
//! port), which the nemesis turns into a bad network: the apps' link cut both ways, or
//! one way (requests pass, answers are lost), every packet delayed, a share of
//! connections reset, a trickle; or the links from chosen Redis nodes cut (a
//! partition inside the cluster). It tells who is calling by the source address:
//! the apps call from 127.0.0.1, each cluster node from an address of its own
//! ([`node_source`]). What a real network does to TCP is what this does: bytes are
//! held, never corrupted, and a link that heals delivers what it held (TCP would
//! have sent it again), in order.
//!
//! Each connection is two pumps, one a direction; a pump reads what its side sent,
//! stamps it with when it may arrive, and its writer delivers it then, unless the link
//! holds that direction. The pumps' queues are bounded: a held link fills them, then
//! the sender's socket, as a stalled network would.

use rand::Rng;
use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{
        tcp::{OwnedReadHalf, OwnedWriteHalf},
        TcpListener, TcpStream,
    },
    sync::{mpsc, watch},
    task::JoinHandle,
    time::Instant,
};

/// Chunks a pump holds before it stops reading (each up to [`CHUNK`] bytes).
const QUEUED: usize = 256;
const CHUNK: usize = 16 * 1024;

/// Where the app processes (and anything but a cluster node) call from.
const APPS: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The source address cluster node `i` makes its connections from (its
/// `bind-source-addr`): every 127.x address is this machine's own.
pub fn node_source(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 10 + i as u8))
}

/// What the link does now.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Mode {
    #[default]
    Open,
    /// Nothing passes either way: held until the link heals. A new connection is
    /// accepted but gets no further.
    Cut,
    /// Requests pass; answers are held until the link heals.
    AnswersLost,
    /// Every chunk arrives `ms` later, give or take `jitter` ms (in order).
    Delay { ms: u64, jitter: u64 },
    /// Each direction carries at most this many bytes a second.
    Trickle { bytes_per_s: u64 },
    /// A share of connections (open when it starts, or made while it lasts) reset.
    Flaky { share: f64 },
}

/// The two directions: from the app (requests) and from the store (answers).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Requests,
    Answers,
}

/// What the proxy does to each caller: the apps' mode, and the callers cut off.
#[derive(Clone, Debug, Default)]
struct Links {
    apps: Mode,
    cut: Vec<IpAddr>,
}

impl Links {
    /// What a connection from `peer` gets: cut if its caller is, the apps' mode if an
    /// app calls, open otherwise.
    fn mode_for(&self, peer: IpAddr) -> Mode {
        if self.cut.contains(&peer) {
            Mode::Cut
        } else if peer == APPS {
            self.apps
        } else {
            Mode::Open
        }
    }
}

impl Mode {
    /// Whether `direction` passes now.
    fn passes(self, direction: Direction) -> bool {
        match self {
            Self::Cut => false,
            Self::AnswersLost => direction == Direction::Requests,
            _ => true,
        }
    }
}

/// One proxy: its port, what it does to each caller, and the connections it carries.
pub struct Proxy {
    pub port: u16,
    links: watch::Sender<Links>,
    connections: Mutex<Vec<Connection>>,
    accept: Mutex<Option<JoinHandle<()>>>,
}

/// A carried connection: who called, and its tasks (aborting them resets the
/// caller's socket, which lingers for nothing).
struct Connection {
    peer: IpAddr,
    pumps: Vec<JoinHandle<()>>,
}

impl Proxy {
    /// A proxy on a free loopback port to `target`, open.
    pub async fn start(target: SocketAddr) -> Result<Arc<Self>, String> {
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|e| format!("proxy: {e}"))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let proxy = Arc::new(Self {
            port,
            links: watch::channel(Links::default()).0,
            connections: Mutex::default(),
            accept: Mutex::default(),
        });
        let accepting = tokio::spawn({
            let proxy = Arc::downgrade(&proxy);
            async move {
                while let Ok((caller, from)) = listener.accept().await {
                    let Some(proxy) = proxy.upgrade() else { return };
                    proxy.carry(caller, from.ip(), target);
                }
            }
        });
        *proxy.accept.lock().unwrap() = Some(accepting);
        Ok(proxy)
    }

    /// Sets what the apps' link does from now on; `Flaky` resets its share of the
    /// apps' open connections at once.
    pub fn set(&self, mode: Mode) {
        self.links.send_modify(|links| links.apps = mode);
        if let Mode::Flaky { share } = mode {
            let mut connections = self.connections.lock().unwrap();
            let mut rng = rand::rng();
            connections.retain(|c| {
                let reset = c.peer == APPS && rng.random_bool(share);
                if reset {
                    c.pumps.iter().for_each(JoinHandle::abort);
                }
                !reset
            });
        }
    }

    /// Stops carrying anything (the run is over).
    pub fn stop(&self) {
        if let Some(accept) = self.accept.lock().unwrap().take() {
            accept.abort();
        }
        for c in self.connections.lock().unwrap().drain(..) {
            c.pumps.iter().for_each(JoinHandle::abort);
        }
    }

    /// Cuts the links from `peer` (both ways, open connections and new ones), or
    /// heals them.
    pub fn cut_from(&self, peer: IpAddr, cut: bool) {
        self.links.send_modify(|links| {
            links.cut.retain(|p| *p != peer);
            if cut {
                links.cut.push(peer);
            }
        });
    }

    /// Connects `app` (calling from `peer`) to `target` once the link lets requests
    /// through, then pumps.
    fn carry(&self, app: TcpStream, peer: IpAddr, target: SocketAddr) {
        let mut mode = self.links.subscribe();
        if let Mode::Flaky { share } = mode.borrow().mode_for(peer) {
            if rand::rng().random_bool(share) {
                let _ = app.set_zero_linger();
                return;
            }
        }
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<(OwnedReadHalf, OwnedWriteHalf)>();
        let modes = (self.links.subscribe(), self.links.subscribe());
        let opening = tokio::spawn(async move {
            // A cut link: the connection is made when it heals.
            while !mode.borrow_and_update().mode_for(peer).passes(Direction::Requests) {
                if mode.changed().await.is_err() {
                    return;
                }
            }
            if let Ok(store) = TcpStream::connect(target).await {
                let _ = store.set_nodelay(true);
                let _ = done_tx.send(store.into_split());
            }
        });
        let _ = app.set_nodelay(true);
        let _ = app.set_zero_linger();
        let (app_read, app_write) = app.into_split();
        let (requests_mode, answers_mode) = modes;
        let pumps = tokio::spawn(async move {
            let Ok((store_read, store_write)) = done_rx.await else { return };
            let requests = pump(app_read, store_write, (requests_mode, peer), Direction::Requests);
            let answers = pump(store_read, app_write, (answers_mode, peer), Direction::Answers);
            // Either side closing ends the connection (both sockets dropped).
            tokio::select! {
                _ = requests => {}
                _ = answers => {}
            }
        });
        let mut connections = self.connections.lock().unwrap();
        connections.retain(|c| c.pumps.iter().any(|p| !p.is_finished()));
        connections.push(Connection { peer, pumps: vec![opening, pumps] });
    }
}

/// Carries one direction of a connection from `peer` until either end closes.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    (mut mode, peer): (watch::Receiver<Links>, IpAddr),
    direction: Direction,
) {
    let (queue, mut due) = mpsc::channel::<(Instant, Vec<u8>)>(QUEUED);
    let mut reading_mode = mode.clone();
    let reading = async move {
        let mut last = Instant::now();
        loop {
            let mut chunk = vec![0; CHUNK];
            let n = match from.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            chunk.truncate(n);
            let delay = match reading_mode.borrow_and_update().mode_for(peer) {
                Mode::Delay { ms, jitter } => {
                    let jitter = rand::rng().random_range(0..=jitter * 2) as i64 - jitter as i64;
                    Duration::from_millis((ms as i64 + jitter).max(0) as u64)
                }
                _ => Duration::ZERO,
            };
            // In order: never before the chunk ahead of it.
            last = (Instant::now() + delay).max(last);
            if queue.send((last, chunk)).await.is_err() {
                return;
            }
        }
    };
    let writing = async move {
        while let Some((at, chunk)) = due.recv().await {
            tokio::time::sleep_until(at).await;
            // Held while the link does not pass this direction.
            while !mode.borrow_and_update().mode_for(peer).passes(direction) {
                if mode.changed().await.is_err() {
                    return;
                }
            }
            let now = mode.borrow().mode_for(peer);
            if let Mode::Trickle { bytes_per_s } = now {
                for piece in chunk.chunks(256) {
                    if to.write_all(piece).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_secs_f64(piece.len() as f64 / bytes_per_s.max(1) as f64)).await;
                }
            } else if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        _ = reading => {}
        _ = writing => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server, and a proxy in front of it.
    async fn echo_behind_proxy() -> Arc<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0; 1024];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Proxy::start(target).await.unwrap()
    }

    async fn ask(s: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
        s.write_all(b"ping").await.ok()?;
        let mut buf = [0; 4];
        tokio::time::timeout(within, s.read_exact(&mut buf)).await.ok()?.ok()?;
        Some(buf.to_vec())
    }

    #[tokio::test]
    async fn a_link_cut_holds_what_it_carries_and_delivers_it_when_healed() {
        let proxy = echo_behind_proxy().await;
        let mut s = TcpStream::connect(("127.0.0.1", proxy.port)).await.unwrap();
        assert_eq!(ask(&mut s, Duration::from_secs(5)).await.as_deref(), Some(&b"ping"[..]));
        for mode in [Mode::Cut, Mode::AnswersLost] {
            proxy.set(mode);
            assert_eq!(ask(&mut s, Duration::from_millis(200)).await, None, "{mode:?} passes nothing back");
            proxy.set(Mode::Open);
            let mut buf = [0; 4];
            tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut buf)).await.unwrap().unwrap();
            assert_eq!(&buf, b"ping", "what {mode:?} held arrives once healed");
        }
        proxy.set(Mode::Delay { ms: 300, jitter: 0 });
        let asked = std::time::Instant::now();
        assert!(ask(&mut s, Duration::from_secs(5)).await.is_some());
        assert!(asked.elapsed() >= Duration::from_millis(600), "both ways delayed: {:?}", asked.elapsed());
        proxy.set(Mode::Flaky { share: 1.0 });
        assert_eq!(ask(&mut s, Duration::from_secs(5)).await, None, "the connection was reset");
        proxy.set(Mode::Open);
        let mut again = TcpStream::connect(("127.0.0.1", proxy.port)).await.unwrap();
        assert!(ask(&mut again, Duration::from_secs(5)).await.is_some());
        proxy.stop();
    }

    /// A connection from cluster node `i`'s source address.
    async fn connect_as_node(i: usize, port: u16) -> TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::new(node_source(i), 0)).unwrap();
        socket.connect(SocketAddr::from(([127, 0, 0, 1], port))).await.unwrap()
    }

    #[tokio::test]
    async fn a_node_cut_off_is_cut_and_nobody_else() {
        let proxy = echo_behind_proxy().await;
        let mut node = connect_as_node(1, proxy.port).await;
        let mut app = TcpStream::connect(("127.0.0.1", proxy.port)).await.unwrap();
        proxy.cut_from(node_source(1), true);
        assert_eq!(ask(&mut node, Duration::from_millis(200)).await, None, "the node's link is cut");
        let mut new_link = connect_as_node(1, proxy.port).await;
        assert_eq!(ask(&mut new_link, Duration::from_millis(200)).await, None, "and its new links");
        let mut other = connect_as_node(2, proxy.port).await;
        assert!(ask(&mut other, Duration::from_secs(5)).await.is_some(), "another node passes");
        assert!(ask(&mut app, Duration::from_secs(5)).await.is_some(), "an app passes");
        proxy.set(Mode::Cut);
        assert!(ask(&mut other, Duration::from_secs(5)).await.is_some(), "the apps' mode is the apps' only");
        proxy.set(Mode::Open);
        proxy.cut_from(node_source(1), false);
        let mut buf = [0; 4];
        tokio::time::timeout(Duration::from_secs(5), node.read_exact(&mut buf)).await.unwrap().unwrap();
        assert_eq!(&buf, b"ping", "what the cut held arrives once healed");
        proxy.stop();
    }
}
