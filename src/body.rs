//! Request bodies, read with a cap. The server-function layer reads a body whole,
//! however large, before decoding it; every `/api/...` call comes through here first
//! (`server::api_guard`), so a caller cannot have the server hold megabytes per request.

use crate::error::{AppError, AppResult};
use axum::body::Body;
use http_body_util::BodyExt;
use hyper::body::Body as _;

/// How much of a body past its cap is still read (and dropped) before the refusal. A
/// server that closes a socket with unread data resets it, and a client still sending
/// hears the reset, not the refusal; past this much, it does.
const DRAIN_BYTES: usize = 4 * 1024 * 1024;

/// The body's bytes, or `invalid_input` when it holds more than `cap` bytes or could
/// not be read.
pub async fn read_capped(mut body: Body, cap: usize) -> AppResult<Vec<u8>> {
    let refused = || AppError::invalid(format!("The request body is unreadable or larger than {cap} bytes."));
    // Announced larger than is ever read: refused unread.
    if body.size_hint().lower() > DRAIN_BYTES as u64 {
        return Err(refused());
    }
    let (mut kept, mut read) = (Vec::new(), 0);
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(|_| refused())?.into_data() else { continue };
        read += data.len();
        if read <= cap {
            kept.extend_from_slice(&data);
        } else if read > DRAIN_BYTES {
            break;
        }
    }
    if read > cap {
        return Err(refused());
    }
    Ok(kept)
}
