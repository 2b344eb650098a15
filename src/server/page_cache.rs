//! The shop page (`/`), rendered once and served to every visitor for a moment.
//!
//! Just before a sale opens, thousands of shoppers load and reload the shop page in
//! the same second. One render costs the server about half a millisecond of CPU
//! (Leptos' SSR, the voucher list from SQL and Redis): at a few thousand pages a
//! second the page alone would take the cores the grabs need. The page is the same
//! for every visitor: who is signed in is asked by the browser after hydration, and
//! stock moves over the live feed. So one render serves every `GET /` for the
//! page cache's lifetime (`SECKILL_PAGE_CACHE_MS`, 1 s by default):
//! - one render at a time: requests that find the page out of date wait for the
//!   render in flight instead of starting their own;
//! - only a whole `200` without `Set-Cookie` is kept;
//! - creating or warming a voucher on this process dates the page at once
//!   ([`Changes`]); other processes show it when their page expires.

use crate::voucher::Changes;
use axum::{
    body::{to_bytes, Body, Bytes},
    extract::Request,
    http::{header, HeaderMap, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};
use std::{
    sync::{Arc, PoisonError, RwLock},
    time::{Duration, Instant},
};

/// Largest page kept. The list shows at most 100 vouchers, far below it; a body
/// beyond it cannot be passed on either (it was read to be kept), so it answers 500.
const MAX_PAGE: usize = 8 * 1024 * 1024;

/// The shared shop page and what keeps it up to date.
pub struct PageCache {
    /// How long one render is served; zero turns the cache off.
    lifetime: Duration,
    changes: Arc<Changes>,
    page: RwLock<Option<Arc<Page>>>,
    /// Held by the one request rendering the page.
    render: tokio::sync::Mutex<()>,
}

/// One render of the page.
struct Page {
    /// When its render began: its data is at least this old.
    rendered: Instant,
    /// [`Changes::count`] when its render began.
    changes: u64,
    headers: HeaderMap,
    body: Bytes,
}

impl PageCache {
    pub fn new(lifetime: Duration, changes: Arc<Changes>) -> Self {
        Self { lifetime, changes, page: RwLock::new(None), render: tokio::sync::Mutex::new(()) }
    }

    /// Whether `req` asks for the shared page: `GET /` with no query.
    pub fn applies(&self, req: &Request) -> bool {
        !self.lifetime.is_zero()
            && req.method() == Method::GET
            && req.uri().path() == "/"
            && req.uri().query().is_none()
    }

    /// The shared page, rendered by `next` when it is missing or out of date.
    pub async fn serve(&self, req: Request, next: Next) -> Response {
        if let Some(page) = self.current() {
            return page.response();
        }
        let _rendering = self.render.lock().await;
        if let Some(page) = self.current() {
            return page.response();
        }
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
        let page = Arc::new(Page { rendered, changes, headers: parts.headers, body });
        *self.page.write().unwrap_or_else(PoisonError::into_inner) = Some(page.clone());
        page.response()
    }

    /// The page, unless it expired or a voucher changed since its render.
    fn current(&self) -> Option<Arc<Page>> {
        let page = self.page.read().unwrap_or_else(PoisonError::into_inner).clone()?;
        (page.rendered.elapsed() < self.lifetime && page.changes == self.changes.count()).then_some(page)
    }
}

impl Page {
    fn response(&self) -> Response {
        let mut response = Response::new(Body::from(self.body.clone()));
        *response.headers_mut() = self.headers.clone();
        response
    }
}
