//! Request bodies, read with a cap. The server-function layer reads a body whole,
//! however large, before decoding it; every `/api/...` call comes through here first
//! (`server::api_guard`), so a caller cannot have the server hold megabytes per request.

use crate::error::{invalid_body, invalid_field, AppError, AppResult};
use axum::body::{Body, Bytes};
use http_body_util::BodyExt;
use hyper::body::Body as _;

/// How much of a body past its cap is still read (and dropped) before the refusal. A
/// server that closes a socket with unread data resets it, and a client still sending
/// hears the reset, not the refusal; past this much, it does.
const DRAIN_BYTES: usize = 4 * 1024 * 1024;

/// The body's bytes, or `invalid_input` when it holds more than `cap` bytes or could
/// not be read. A body that came in one frame (a grab's always does) is returned as
/// that frame, not copied.
pub async fn read_capped(mut body: Body, cap: usize) -> AppResult<Bytes> {
    let refused = || AppError::invalid(format!("The request body is unreadable or larger than {cap} bytes."));
    // Announced larger than is ever read: refused unread.
    if body.size_hint().lower() > DRAIN_BYTES as u64 {
        return Err(refused());
    }
    let (mut first, mut more, mut read) = (Bytes::new(), Vec::new(), 0);
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(|_| refused())?.into_data() else { continue };
        read += data.len();
        if read > cap {
            if read > DRAIN_BYTES {
                break;
            }
        } else if first.is_empty() {
            first = data;
        } else {
            if more.is_empty() {
                more.extend_from_slice(&first);
            }
            more.extend_from_slice(&data);
        }
    }
    if read > cap {
        return Err(refused());
    }
    Ok(if more.is_empty() { first } else { more.into() })
}

/// Why `bytes` are not the arguments `T`: `invalid_input` naming the field at fault in
/// `param` (its path into the body: `stock`, `challenge.number`), where the decoder's
/// own words name only a line and a column; `None` when they are `T`'s. Decoded again
/// only once a decode failed: a call refused for its body pays for it, no other.
pub fn fault<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Option<AppError> {
    let mut decoder = serde_json::Deserializer::from_slice(bytes);
    let err = match serde_path_to_error::deserialize::<_, T>(&mut decoder) {
        Ok(_) => return decoder.end().err().map(|e| invalid_body(&e.to_string())),
        Err(err) => err,
    };
    let detail = err.inner().to_string();
    // Only a value the arguments hold is named: JSON that does not parse may be inside
    // a key the arguments do not have (the caller's words, which `param` must not carry).
    if err.inner().classify() != serde_json::error::Category::Data {
        return Some(invalid_body(&detail));
    }
    let within = err.path().iter().next().is_some().then(|| err.path().to_string());
    // Only the decoder's own words: a value it quotes could say anything.
    let named = |words: &str| detail.strip_prefix(words).and_then(|rest| rest.split_once('`')).map(|(f, _)| f);
    let missing = named("missing field `").or_else(|| named("duplicate field `"));
    let field = match (within, missing) {
        (Some(within), Some(missing)) => format!("{within}.{missing}"),
        (Some(within), None) => within,
        (None, Some(missing)) => missing.to_owned(),
        (None, None) => return Some(invalid_body(&detail)),
    };
    Some(invalid_field(&field, &detail))
}

/// A call's arguments are one JSON object, field by field, as the API's document
/// describes them: serde would also take a struct as an array of its fields in order
/// (`[7, null]` for `{"voucher_id": 7, "token": null}`, `[]` for a call without
/// arguments), a form no client is told of, so it is refused.
pub fn check_object(bytes: &[u8]) -> AppResult<()> {
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => Ok(()),
        _ => Err(invalid_body("the arguments must be a JSON object")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Args {
        voucher_id: i64,
        challenge: Option<Challenge>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Challenge {
        number: u64,
        salt: String,
    }

    #[test]
    fn the_field_at_fault_is_named_by_its_path() {
        let named = |body: &str| fault::<Args>(body.as_bytes()).map(|e| (e.code, e.param));
        let invalid = |field: &str| Some((crate::error::ErrorCode::InvalidInput, Some(field.to_owned())));
        assert_eq!(named(r#"{}"#), invalid("voucher_id"));
        assert_eq!(named(r#"{"voucher_id": "7"}"#), invalid("voucher_id"));
        assert_eq!(named(r#"{"voucher_id": 7, "challenge": {"number": -1, "salt": ""}}"#), invalid("challenge.number"));
        assert_eq!(named(r#"{"voucher_id": 7, "challenge": {"number": 1}}"#), invalid("challenge.salt"));
        assert_eq!(named(r#"{"voucher_id": 7} {}"#).map(|(_, param)| param), Some(None), "trailing: no field");
        assert_eq!(named(r#"{"voucher_id": 7, "challenge": null}"#), None, "it decodes");
        assert_eq!(
            named(r#"{"voucher_id": "missing field `x`"}"#),
            invalid("voucher_id"),
            "a value's words are not the decoder's"
        );
        assert_eq!(named(r#"{"voucher_id": 7, "voucher_id": 8}"#), invalid("voucher_id"), "twice");
        for unparsed in [r#"{"<b>": tru}"#, r#"{"voucher_id": 7,}"#, r#"{"voucher_id": 1,"#] {
            assert_eq!(named(unparsed).map(|(_, param)| param), Some(None), "{unparsed}: no field named");
        }
        assert_eq!(invalid_field(&"x".repeat(65), "unknown").param, None, "longer than any field");
    }
}
