//! A TCP link to Redis that can hold what its client sends, for drills of a command
//! that reaches Redis late (a slow or partitioned network between healthy processes).

use std::sync::{
    atomic::{AtomicBool, AtomicUsize, Ordering},
    Arc,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::{mpsc, watch},
};

/// A link to one Redis: clients connect to [`HoldingLink::url`]. From the `nth` send
/// that carries its marker on, everything its clients send is held until
/// [`HoldingLink::release`] (it goes through) or [`HoldingLink::sever`] (it is lost);
/// answers always pass.
pub struct HoldingLink {
    url: String,
    holding: Arc<AtomicBool>,
    state: watch::Sender<State>,
}

/// Where a link stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Holding from the marked send on.
    Armed,
    /// What was held went through; nothing is held any more.
    Released,
    /// What was held is lost, its connections closed, and new ones refused until
    /// [`HoldingLink::mend`]; nothing is held any more.
    Severed,
}

impl HoldingLink {
    /// A link to the Redis at `target` (`host:port`) that holds from the `nth` send
    /// carrying `marker` (`b"EVALSHA"`: a script call) on.
    pub async fn to(target: &str, (marker, nth): (&'static [u8], usize)) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("redis://{}", listener.local_addr().unwrap());
        let holding = Arc::new(AtomicBool::new(false));
        let (state, _) = watch::channel(State::Armed);
        let (target, hold, states) = (target.to_owned(), holding.clone(), state.clone());
        let seen = Arc::new(AtomicUsize::new(0));
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *states.borrow() == State::Severed {
                    // Refused (closed at once) until mended.
                    continue;
                }
                let Ok(server) = TcpStream::connect(&target).await else { return };
                let marked =
                    Marked { marker, nth, seen: seen.clone(), holding: hold.clone(), state: states.subscribe() };
                tokio::spawn(link(client, server, marked));
            }
        });
        Self { url, holding, state }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether something sent is being held.
    pub fn holding(&self) -> bool {
        self.holding.load(Ordering::SeqCst) && *self.state.borrow() == State::Armed
    }

    /// Drives `call` until this link holds what it sent (`what`: the held send, for
    /// the failure messages); fails the test if the call ends first, or if nothing is
    /// held soon.
    pub async fn drive_until_held<F>(&self, mut call: std::pin::Pin<&mut F>, what: &str)
    where
        F: std::future::Future,
        F::Output: std::fmt::Debug,
    {
        let deadline = tokio::time::Instant::now() + super::SOON;
        while !self.holding() {
            tokio::select! {
                ended = &mut call => panic!("the call ended before its {what} was sent: {ended:?}"),
                () = tokio::time::sleep(std::time::Duration::from_millis(5)) => {}
            }
            assert!(tokio::time::Instant::now() < deadline, "the {what} was never sent");
        }
    }

    /// Lets everything held through, in order, and holds nothing more.
    pub fn release(&self) {
        self.state.send_replace(State::Released);
    }

    /// Loses everything held and closes the connections that held it, refusing new
    /// ones (their clients' commands under way fail, a resend on a new connection too),
    /// like a link that broke; holds nothing more.
    pub fn sever(&self) {
        self.state.send_replace(State::Severed);
    }

    /// Takes connections again after [`HoldingLink::sever`], and passes everything.
    pub fn mend(&self) {
        self.state.send_replace(State::Released);
    }
}

/// What a link looks for in what its clients send.
struct Marked {
    marker: &'static [u8],
    nth: usize,
    /// Sends carrying the marker so far, every client's.
    seen: Arc<AtomicUsize>,
    holding: Arc<AtomicBool>,
    state: watch::Receiver<State>,
}

impl Marked {
    /// Whether `sent`, and what follows it, is held.
    fn holds(&self, sent: &[u8]) -> bool {
        if *self.state.borrow() != State::Armed {
            return false;
        }
        if sent.windows(self.marker.len()).any(|w| w == self.marker)
            && self.seen.fetch_add(1, Ordering::SeqCst) + 1 >= self.nth
        {
            self.holding.store(true, Ordering::SeqCst);
        }
        self.holding.load(Ordering::SeqCst)
    }
}

/// Copies one client's connection both ways; what it sends from the marked send on
/// waits for the release, or is lost with the connection when the link is severed.
async fn link(client: TcpStream, server: TcpStream, marked: Marked) {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let answers = tokio::spawn(async move { tokio::io::copy(&mut from_server, &mut to_client).await });
    let (sends, mut to_forward) = mpsc::unbounded_channel::<(Vec<u8>, bool)>();
    let mut state = marked.state.clone();
    tokio::spawn(async move {
        while let Some((sent, held)) = to_forward.recv().await {
            match state.wait_for(|s| !held || *s != State::Armed).await.map(|s| *s) {
                Ok(State::Severed) if held => {
                    // Closing the client's side fails its commands under way.
                    answers.abort();
                    return;
                }
                Err(_) => return,
                Ok(_) => {}
            }
            if to_server.write_all(&sent).await.is_err() {
                return;
            }
        }
    });
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from_client.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let sent = buf[..n].to_vec();
        let held = marked.holds(&sent);
        if sends.send((sent, held)).is_err() {
            return;
        }
    }
}

/// A replica's link to its master whose master-to-replica half can be paused: the
/// replica falls behind, as over a slow or broken network.
pub struct ReplicationLink {
    pub port: u16,
    paused: watch::Sender<bool>,
}

impl ReplicationLink {
    pub async fn to(master_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (paused, pauses) = watch::channel(false);
        tokio::spawn(async move {
            while let Ok((replica, _)) = listener.accept().await {
                let Ok(master) = TcpStream::connect(("127.0.0.1", master_port)).await else { return };
                let mut pauses = pauses.clone();
                tokio::spawn(async move {
                    let (mut from_replica, mut to_replica) = replica.into_split();
                    let (mut from_master, mut to_master) = master.into_split();
                    tokio::spawn(async move { tokio::io::copy(&mut from_replica, &mut to_master).await });
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n @ 1..) = from_master.read(&mut buf).await {
                        if pauses.wait_for(|paused| !*paused).await.is_err()
                            || to_replica.write_all(&buf[..n]).await.is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        Self { port, paused }
    }

    pub fn pause(&self, paused: bool) {
        self.paused.send_replace(paused);
    }
}

/// A link to one Redis that loses one answer: the `nth` send carrying its marker goes
/// through, and the connection it came on is closed before the answer comes back (a
/// connection that died with the answer on its way); and, when it is given one, the
/// answer to every send carrying a second marker. Everything else passes.
pub struct LosingLink {
    url: String,
    lost: Arc<AtomicUsize>,
}

impl LosingLink {
    /// A link to the Redis at `target` (`host:port`) that loses the answer to the
    /// `nth` send carrying `marker`, and to every send carrying `every` when given.
    pub async fn to(target: &str, (marker, nth): (&'static [u8], usize), every: Option<&'static [u8]>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("redis://{}", listener.local_addr().unwrap());
        let (target, seen, lost) = (target.to_owned(), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let counted = lost.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&target).await else { return };
                tokio::spawn(losing(client, server, ((marker, nth), every), seen.clone(), counted.clone()));
            }
        });
        Self { url, lost }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Answers lost so far.
    pub fn lost(&self) -> usize {
        self.lost.load(Ordering::SeqCst)
    }
}

/// Passes one client's connection through, closing it instead of passing the answer
/// after a marked send.
async fn losing(
    client: TcpStream,
    server: TcpStream,
    ((marker, nth), every): ((&'static [u8], usize), Option<&'static [u8]>),
    seen: Arc<AtomicUsize>,
    lost: Arc<AtomicUsize>,
) {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let losing = AtomicBool::new(false);
    let sends = async {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from_client.read(&mut buf).await {
            let sent = &buf[..n];
            let carries = |marker: &[u8]| sent.windows(marker.len()).any(|w| w == marker);
            if (carries(marker) && seen.fetch_add(1, Ordering::SeqCst) + 1 == nth) || every.is_some_and(carries) {
                losing.store(true, Ordering::SeqCst);
            }
            if to_server.write_all(sent).await.is_err() {
                return;
            }
        }
    };
    let answers = async {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from_server.read(&mut buf).await {
            if losing.load(Ordering::SeqCst) {
                lost.fetch_add(1, Ordering::SeqCst);
                return;
            }
            if to_client.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    // Either way ends the link: both sockets close with it.
    tokio::select! {
        () = sends => {}
        () = answers => {}
    }
}
