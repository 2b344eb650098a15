//! Gives `/api/...` refusals the HTTP status their error code calls for.
//!
//! The server-function layer answers every error with 500, including bodies it could
//! not decode (the caller's fault). Mapping here, from the JSON error body, keeps
//! one rule for all endpoints: 4xx for the caller's fault, 5xx only for ours.

use crate::error::AppError;
use axum::{
    body::{to_bytes, Body},
    extract::Request,
    http::StatusCode,
    middleware::Next,
    response::Response,
};

/// Error bodies are small; anything larger is not ours and is passed on untouched.
const MAX_ERROR_BODY: usize = 64 * 1024;

pub async fn status_from_code(req: Request, next: Next) -> Response {
    let is_api = req.uri().path().starts_with("/api/");
    let res = next.run(req).await;
    if !is_api || res.status() != StatusCode::INTERNAL_SERVER_ERROR {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let Ok(bytes) = to_bytes(body, MAX_ERROR_BODY).await else {
        parts.status = StatusCode::INTERNAL_SERVER_ERROR;
        return Response::from_parts(parts, Body::empty());
    };
    if let Ok(err) = serde_json::from_slice::<AppError>(&bytes) {
        parts.status = StatusCode::from_u16(err.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    }
    Response::from_parts(parts, Body::from(bytes))
}
