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
/// [`HoldingLink::release`]; answers always pass.
pub struct HoldingLink {
    url: String,
    holding: Arc<AtomicBool>,
    released: watch::Sender<bool>,
}

impl HoldingLink {
    /// A link to the Redis at `target` (`host:port`) that holds from the `nth` send
    /// carrying `marker` (`b"EVALSHA"`: a script call) on.
    pub async fn to(target: &str, (marker, nth): (&'static [u8], usize)) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("redis://{}", listener.local_addr().unwrap());
        let holding = Arc::new(AtomicBool::new(false));
        let (released, _) = watch::channel(false);
        let (target, hold, release) = (target.to_owned(), holding.clone(), released.clone());
        let seen = Arc::new(AtomicUsize::new(0));
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&target).await else { return };
                let marked = Marked { marker, nth, seen: seen.clone(), holding: hold.clone() };
                tokio::spawn(link(client, server, marked, release.subscribe()));
            }
        });
        Self { url, holding, released }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether something sent is being held.
    pub fn holding(&self) -> bool {
        self.holding.load(Ordering::SeqCst) && !*self.released.borrow()
    }

    /// Lets everything held through, in order, and holds nothing more.
    pub fn release(&self) {
        self.released.send_replace(true);
    }
}

/// What a link looks for in what its clients send.
struct Marked {
    marker: &'static [u8],
    nth: usize,
    /// Sends carrying the marker so far, every client's.
    seen: Arc<AtomicUsize>,
    holding: Arc<AtomicBool>,
}

impl Marked {
    /// Whether `sent`, and what follows it, is held.
    fn holds(&self, sent: &[u8]) -> bool {
        if sent.windows(self.marker.len()).any(|w| w == self.marker)
            && self.seen.fetch_add(1, Ordering::SeqCst) + 1 >= self.nth
        {
            self.holding.store(true, Ordering::SeqCst);
        }
        self.holding.load(Ordering::SeqCst)
    }
}

/// Copies one client's connection both ways; what it sends from the marked send on
/// waits for the release.
async fn link(client: TcpStream, server: TcpStream, marked: Marked, mut released: watch::Receiver<bool>) {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    tokio::spawn(async move { tokio::io::copy(&mut from_server, &mut to_client).await });
    let (sends, mut to_forward) = mpsc::unbounded_channel::<(Vec<u8>, bool)>();
    tokio::spawn(async move {
        while let Some((sent, held)) = to_forward.recv().await {
            if held && released.wait_for(|r| *r).await.is_err() {
                return;
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
