//! The shop page (`/`), rendered once and served to every visitor for a moment.
//!
//! Just before a sale opens, thousands of shoppers load and reload the shop page in
//! the same second. One render costs the server about half a millisecond of CPU
//! (Leptos' SSR, the voucher list from SQL and Redis): at a few thousand pages a
//! second the page alone would take the cores the grabs need. The page is the same
//! for every visitor: who is signed in is asked by the browser after hydration, stock
//! moves over the live feed, and the page reads no query (so `/?utm_source=…` shares
//! it too). So one render serves every `GET /` for the page's lifetime
//! (`SECKILL_PAGE_CACHE_MS`, 1 s by default):
//! - once it expires, visitors still get it for one more lifetime while a single
//!   render in the background replaces it: nobody waits for a render then;
//! - with no page yet, or once a voucher was created or warmed ([`Changes`]: on this
//!   process at once, on others when the sale event reaches them), visitors wait for
//!   one render in flight instead of each starting their own;
//! - only a whole `200` without `Set-Cookie` is kept.
//!
//! Each render is compressed once (brotli), for the visitors that accept it: a phone on a
//! slow link gets the page in a third of the bytes, for no CPU per visit.
//!
//! Each answer says how old its render is (`Server-Timing: age;dur=<ms>`, from when
//! its body was in hand, after it read the gate's clock): the page's script adds it to
//! the gate's time the render carries, so a Grab button opens at the sale's start and
//! not up to two lifetimes after it (a drill on a slow link, 2026-11-30: 1.1 to 1.9 s
//! late for a page loaded 1.5 s before the start).
//!
//! Every visitor of one render gets the same script nonce. No Content-Security-Policy
//! is sent; one based on nonces would need a nonce per response, not per render.

use crate::bus::{SaleEvent, Subscriber};
use axum::{
    body::{to_bytes, Body, Bytes},
    extract::Request,
    http::{header, HeaderMap, HeaderValue, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};
use std::{
    sync::{Arc, PoisonError, RwLock},
    time::{Duration, Instant},
};
use tokio::sync::Mutex;

/// Counts changes to the vouchers the shop page lists (one created, or warmed back
/// from the database), made here or on another process, as the bus tells them (once
/// each: a change made here is not told again when its event comes back, which dated
/// a page rendered in between for nothing), so the shared shop page knows when it is
/// out of date.
#[derive(Debug, Default)]
pub struct Changes {
    count: std::sync::atomic::AtomicU64,
}

impl Changes {
    /// A change: the page rendered before it is out of date.
    fn note(&self) {
        self.count.fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    pub fn count(&self) -> u64 {
        self.count.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// The bus: a voucher change, here or elsewhere, dates the page; after events may
/// have been lost, the page is taken as out of date.
impl Subscriber for Changes {
    fn heard(&self, event: &SaleEvent, _at_ms: i64) {
        if let SaleEvent::VoucherChanged { .. } = *event {
            self.note();
        }
    }

    fn missed(&self) {
        self.note();
    }
}

/// Largest page kept. The list shows at most 100 vouchers, far below it; a body
/// beyond it cannot be passed on either (it was read to be kept), so it answers 500.
const MAX_PAGE: usize = 8 * 1024 * 1024;

/// The shared shop page and what keeps it up to date.
pub struct PageCache(Arc<Shared>);

struct Shared {
    /// How long one render is served before it is replaced; zero turns the cache off.
    lifetime: Duration,
    changes: Arc<Changes>,
    page: RwLock<Option<Arc<Page>>>,
    /// Held by the one render under way.
    render: Arc<Mutex<()>>,
}

/// One render of the page.
struct Page {
    /// When its render began: its data is at least this old.
    rendered: Instant,
    /// [`Changes::count`] when its render began.
    changes: u64,
    headers: HeaderMap,
    body: Bytes,
    /// The body compressed with brotli, for visitors that accept it.
    brotli: Bytes,
    /// When its body was in hand: how old each answer says it is.
    made: Instant,
}

impl PageCache {
    pub fn new(lifetime: Duration, changes: Arc<Changes>) -> Self {
        Self(Arc::new(Shared { lifetime, changes, page: RwLock::new(None), render: Arc::default() }))
    }

    /// Whether `req` asks for the shared page: `GET /`, whatever its query.
    pub fn applies(&self, req: &Request) -> bool {
        !self.0.lifetime.is_zero() && req.method() == Method::GET && req.uri().path() == "/"
    }

    /// The shared page; rendered by `next` when there is none to serve, or in the
    /// background when the one served has expired.
    pub async fn serve(&self, req: Request, next: Next) -> Response {
        let brotli = accepts_brotli(req.headers());
        if let Some(page) = self.0.usable() {
            if page.rendered.elapsed() >= self.0.lifetime {
                self.refresh(req, next);
            }
            return page.response(brotli);
        }
        let _rendering = self.0.render.lock().await;
        match self.0.usable() {
            Some(page) => page.response(brotli),
            None => self.0.render(req, next, brotli).await,
        }
    }

    /// Replaces the expired page in a task of its own, unless a render is under way.
    fn refresh(&self, req: Request, next: Next) {
        let Ok(rendering) = self.0.render.clone().try_lock_owned() else { return };
        let shared = self.0.clone();
        tokio::spawn(async move {
            let _rendering = rendering;
            if shared.usable().is_none_or(|page| page.rendered.elapsed() >= shared.lifetime) {
                shared.render(req, next, false).await;
            }
        });
    }
}

impl Shared {
    /// The page, unless a voucher changed since its render or it expired more than a
    /// lifetime ago (a render that keeps failing must not leave an old page up).
    fn usable(&self) -> Option<Arc<Page>> {
        let page = self.page.read().unwrap_or_else(PoisonError::into_inner).clone()?;
        (page.changes == self.changes.count() && page.rendered.elapsed() < 2 * self.lifetime).then_some(page)
    }

    /// Renders the page through `next`, keeps it if it may be shared, and answers it.
    async fn render(&self, req: Request, next: Next, brotli: bool) -> Response {
        let (rendered, changes) = (Instant::now(), self.changes.count());
        let response = next.run(req).await;
        if response.status() != StatusCode::OK || response.headers().contains_key(header::SET_COOKIE) {
            return response;
        }
        let (parts, body) = response.into_parts();
        let body = match to_bytes(body, MAX_PAGE).await {
            Ok(body) => body,
            Err(e) => {
                tracing::warn!("shop page: its body could not be read whole: {e}");
                return StatusCode::INTERNAL_SERVER_ERROR.into_response();
            }
        };
        let mut headers = parts.headers;
        // The length is the answer's own (the plain or the compressed body).
        headers.remove(header::CONTENT_LENGTH);
        headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
        let compressed = compress(&body);
        let page = Arc::new(Page { rendered, changes, headers, body, brotli: compressed, made: Instant::now() });
        *self.page.write().unwrap_or_else(PoisonError::into_inner) = Some(page.clone());
        page.response(brotli)
    }
}

impl Page {
    fn response(&self, brotli: bool) -> Response {
        let body = if brotli { &self.brotli } else { &self.body };
        let mut response = Response::new(Body::from(body.clone()));
        *response.headers_mut() = self.headers.clone();
        if brotli {
            response.headers_mut().insert(header::CONTENT_ENCODING, HeaderValue::from_static("br"));
        }
        let age = HeaderValue::from_str(&format!("age;dur={}", self.made.elapsed().as_millis()));
        if let Ok(age) = age {
            response.headers_mut().insert(SERVER_TIMING, age);
        }
        response
    }
}

/// `Server-Timing` (not among `http`'s names).
const SERVER_TIMING: header::HeaderName = header::HeaderName::from_static("server-timing");

/// The page's body compressed with brotli at quality 9: within a millisecond for the
/// shop's few kilobytes, once per render.
fn compress(body: &[u8]) -> Bytes {
    let params = brotli::enc::BrotliEncoderParams { quality: 9, ..Default::default() };
    let mut out = Vec::with_capacity(body.len() / 3);
    // Writing to memory cannot fail.
    let _ = brotli::BrotliCompress(&mut &body[..], &mut out, &params);
    out.into()
}

/// Whether the request's `Accept-Encoding` takes brotli (`br`, not at `q=0`).
fn accepts_brotli(headers: &HeaderMap) -> bool {
    headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(
        |coding| {
            let mut parts = coding.split(';').map(str::trim);
            parts.next() == Some("br") && parts.all(|p| p.replace(' ', "") != "q=0")
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brotli_is_sent_to_browsers_that_take_it() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
            accepts_brotli(&h)
        };
        assert!(with("gzip, deflate, br, zstd") && with("br;q=0.5"));
        assert!(!with("gzip, deflate") && !with("br;q=0") && !with("brotli") && !accepts_brotli(&HeaderMap::new()));
        let page = "<html><body>".to_owned() + &"<p>Flash sales</p>".repeat(200) + "</body></html>";
        let packed = compress(page.as_bytes());
        assert!(packed.len() < page.len() / 5, "{} of {}", packed.len(), page.len());
        let mut unpacked = Vec::new();
        brotli::BrotliDecompress(&mut &packed[..], &mut unpacked).unwrap();
        assert_eq!(unpacked, page.as_bytes());
    }
}
