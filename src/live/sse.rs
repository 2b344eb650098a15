//! `GET /api/live`: the operator's feed (admin token or operator cookie), and
//! `GET /api/live?view=shop`: the shoppers' stock feed (public). Server-Sent Events;
//! browsers reconnect by themselves and get a fresh `hello` each time. A feed ends
//! when the server stops, or when its lifetime is up (`SECKILL_FEED_LIFETIME_MS`).

use super::{context::Context, hub::Frame, slots::FeedSlot};
use crate::{
    auth::{context::Context as Accounts, session::Actor},
    client_ip::ClientIp,
    error::{AppError, ErrorCode},
    shutdown::Shutdown,
};
use axum::{
    extract::{Extension, Query, State},
    http::HeaderMap,
    response::{
        sse::{Event, KeepAlive, Sse},
        IntoResponse, Response,
    },
};
use futures::{stream, Stream, StreamExt};
use serde::Deserialize;
use std::{convert::Infallible, sync::Arc, time::Duration};
use tokio::sync::broadcast::{self, error::RecvError};

/// What the feed refuses beyond the front door (`server::refusals`): a `view` it does
/// not know, an operator's feed without an operator.
pub const REFUSES: &[ErrorCode] = &[ErrorCode::InvalidInput, ErrorCode::OperatorRequired];

#[derive(Deserialize)]
pub struct LiveQuery {
    /// `shop` for the public stock feed; absent for the operator's feed.
    view: Option<String>,
}

pub async fn live(
    State(state): State<Arc<Context>>,
    State(accounts): State<Arc<Accounts>>,
    Extension(ClientIp(client)): Extension<ClientIp>,
    Query(q): Query<LiveQuery>,
    headers: HeaderMap,
) -> Response {
    match q.view.as_deref() {
        Some("shop") => {
            let Some(slot) = state.feeds.take_shop(client) else {
                return AppError::new(ErrorCode::Unavailable).into_response();
            };
            let (latest, rx) = state.hub.subscribe_shop();
            let first = latest.map(|s| s.to_string());
            sse(first, rx, |f| f.shop.clone(), &state, slot, Arc::new(|| true)).into_response()
        }
        None => match accounts.secrets.actor(&headers) {
            Some(actor) => operator_feed(&state, &accounts, &actor, headers),
            None => AppError::new(ErrorCode::OperatorRequired).into_response(),
        },
        Some(_) => AppError::invalid("view must be `shop` or absent.").on("view").into_response(),
    }
}

/// An operator's board, from the operators' reserve (shop pages never fill it).
fn operator_feed(state: &Context, accounts: &Accounts, actor: &Actor, headers: HeaderMap) -> Response {
    let Some(slot) = state.feeds.take_operator(actor.name()) else {
        return AppError::new(ErrorCode::Unavailable).into_response();
    };
    let (hello, rx) = state.hub.subscribe_operator();
    // Asked again before each frame: an operator removed, or signed out, while the
    // feed is open gets no further frame.
    let secrets = accounts.secrets.clone();
    let still = Arc::new(move || secrets.actor(&headers).is_some());
    sse(Some(hello), rx, |f| Some(f.operator.clone()), state, slot, still).into_response()
}

/// The first message, then every frame this feed shows, until the server stops or
/// the feed's lifetime is up.
fn sse(
    first: Option<String>,
    rx: broadcast::Receiver<Frame>,
    pick: fn(&Frame) -> Option<Arc<str>>,
    state: &Context,
    slot: FeedSlot,
    still_allowed: Arc<dyn Fn() -> bool + Send + Sync>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let head = stream::iter(first.map(|data| Ok(Event::default().data(data))));
    // The slot lives as long as the stream: the feed's place comes back when it ends.
    let rest = stream::unfold((rx, slot), move |(mut rx, slot)| {
        let still_allowed = still_allowed.clone();
        async move {
            loop {
                match rx.recv().await {
                    Ok(_) if !still_allowed() => return None,
                    Ok(frame) => {
                        if let Some(data) = pick(&frame) {
                            return Some((Ok(Event::default().data(data.as_ref())), (rx, slot)));
                        }
                    }
                    // A slow reader skips frames; the next snapshot is complete anyway.
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return None,
                }
            }
        }
    });
    // End the stream when the server stops, so graceful shutdown is not held up.
    let body = head.chain(rest).take_until(Box::pin(ends(state.shutdown.clone(), state.feed_lifetime)));
    Sse::new(body).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// When a feed ends: the server stops, or a random moment between three quarters of
/// `lifetime` and all of it has passed (so feeds opened together end apart).
async fn ends(shutdown: Shutdown, lifetime: Duration) {
    let lasts = lifetime.mul_f64(rand::random_range(0.75..=1.0));
    tokio::select! {
        () = shutdown.wait() => {}
        () = tokio::time::sleep(lasts) => {}
    }
}
