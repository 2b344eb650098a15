//! The JSON API as the shop's island calls it: without serde. Every shopper's first
//! load carries the island's WASM, and serde's decoders with serde_json's parser were
//! a fifth of it (21 KB brotli for a single prop). So the island asks the browser to
//! parse (`Response.json()`, `JSON.parse`) and to write (`JSON.stringify`) the JSON,
//! and reads each answer's fields by name ([`FromJson`], written beside each type).
//! Everything else (the server, the operators' pages, the tools) speaks serde.
//!
//! A hand decoder must read what serde writes: the tests hold each one to serde's
//! encoder, through [`Json`] on `serde_json::Value`.
#![cfg_attr(
    not(feature = "hydrate"),
    allow(dead_code, reason = "the browser's reader: on the server only its tests call it")
)]

use crate::error::{AppError, AppResult, ErrorCode};

/// A parsed JSON value, read by name and kind: the browser's (`JsValue`) in the island,
/// serde_json's in the tests.
pub trait Json: Sized {
    /// The field `key` of an object; `None` when absent (or this is no object).
    fn field(&self, key: &str) -> Option<Self>;
    /// A whole number (ids, counts, Unix ms).
    fn int(&self) -> Option<i64>;
    fn text(&self) -> Option<String>;
    fn flag(&self) -> Option<bool>;
    /// The items of an array.
    fn items(&self) -> Option<Vec<Self>>;
    fn is_null(&self) -> bool;

    fn int_at(&self, key: &str) -> Option<i64> {
        self.field(key)?.int()
    }
    fn text_at(&self, key: &str) -> Option<String> {
        self.field(key)?.text()
    }
    fn flag_at(&self, key: &str) -> Option<bool> {
        self.field(key)?.flag()
    }
    /// An optional field (`null` or absent: `Some(None)`), read by `read`; `None` when
    /// it holds something `read` refuses.
    fn maybe<T>(&self, key: &str, read: impl Fn(&Self) -> Option<T>) -> Option<Option<T>> {
        match self.field(key) {
            None => Some(None),
            Some(v) if v.is_null() => Some(None),
            Some(v) => read(&v).map(Some),
        }
    }
    /// A field serde fills with its default when absent.
    fn or_default<T: Default>(&self, key: &str, read: impl Fn(&Self) -> Option<T>) -> Option<T> {
        self.maybe(key, read).map(Option::unwrap_or_default)
    }
}

/// A type the island reads from the API's JSON: `None` when the JSON is not that type.
pub trait FromJson: Sized {
    fn from_json(json: &impl Json) -> Option<Self>;
}

impl<T: FromJson> FromJson for Vec<T> {
    fn from_json(json: &impl Json) -> Option<Self> {
        json.items()?.iter().map(T::from_json).collect()
    }
}

impl FromJson for AppError {
    fn from_json(json: &impl Json) -> Option<Self> {
        Some(Self {
            code: ErrorCode::from_name(&json.text_at("code")?)?,
            message: json.text_at("message")?,
            param: json.maybe("param", Json::text)?,
            order_id: json.maybe("order_id", Json::text)?,
            receipt: json.maybe("receipt", Json::text)?,
        })
    }
}

/// An RFC 3339 time, as chrono writes them.
pub fn rfc3339(json: &impl Json) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(&json.text()?).ok().map(|t| t.to_utc())
}

/// Arguments of a call, written as JSON by the browser (on the server, where the
/// island never calls, a `serde_json` map the tests compare with the server function's
/// own arguments).
#[derive(Default)]
pub struct Args {
    #[cfg(feature = "hydrate")]
    object: js_sys::Object,
    #[cfg(not(feature = "hydrate"))]
    pub map: serde_json::Map<String, serde_json::Value>,
}

impl Args {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn int(self, key: &str, n: i64) -> Self {
        #[cfg(feature = "hydrate")]
        return self.set(key, wasm_bindgen::JsValue::from_f64(n as f64));
        #[cfg(not(feature = "hydrate"))]
        self.set(key, n.into())
    }

    /// A yes or no.
    pub fn flag(self, key: &str, b: bool) -> Self {
        #[cfg(feature = "hydrate")]
        return self.set(key, wasm_bindgen::JsValue::from_bool(b));
        #[cfg(not(feature = "hydrate"))]
        self.set(key, b.into())
    }

    /// A text, or `null`.
    pub fn text(self, key: &str, s: Option<&str>) -> Self {
        #[cfg(feature = "hydrate")]
        return self.set(key, s.map_or(wasm_bindgen::JsValue::NULL, wasm_bindgen::JsValue::from_str));
        #[cfg(not(feature = "hydrate"))]
        self.set(key, s.into())
    }

    #[cfg(feature = "hydrate")]
    fn set(self, key: &str, value: wasm_bindgen::JsValue) -> Self {
        let _ = js_sys::Reflect::set(&self.object, &key.into(), &value);
        self
    }

    #[cfg(not(feature = "hydrate"))]
    fn set(mut self, key: &str, value: serde_json::Value) -> Self {
        self.map.insert(key.to_owned(), value);
        self
    }
}

/// Calls the server function at `path` (its `ServerFn::PATH`) with `args`: its answer,
/// or the refusal it sent. Unreadable or unreached is `network`, as the
/// server-function client says it. Only the browser calls (the island's tasks and
/// handlers run there); on the server it refuses.
pub async fn call<T: FromJson>(path: &str, args: Args) -> AppResult<T> {
    #[cfg(feature = "hydrate")]
    {
        let (ok, body) = browser::post(path, &args.object).await.ok_or(ErrorCode::Network)?;
        if ok {
            T::from_json(&body).ok_or_else(|| ErrorCode::Network.into())
        } else {
            Err(AppError::from_json(&body).unwrap_or_else(|| ErrorCode::Network.into()))
        }
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = (path, args);
        Err(ErrorCode::Internal.into())
    }
}

/// Reads `text` (JSON) as a `T`.
pub fn parse<T: FromJson>(text: &str) -> Option<T> {
    #[cfg(feature = "hydrate")]
    return T::from_json(&js_sys::JSON::parse(text).ok()?);
    #[cfg(not(feature = "hydrate"))]
    T::from_json(&serde_json::from_str::<serde_json::Value>(text).ok()?)
}

#[cfg(feature = "hydrate")]
mod browser {
    use super::Json;
    use js_sys::futures::JsFuture;
    use js_sys::{Array, Reflect, JSON};
    use wasm_bindgen::{JsCast, JsValue};

    impl Json for JsValue {
        fn field(&self, key: &str) -> Option<Self> {
            if !self.is_object() {
                return None;
            }
            Reflect::get(self, &key.into()).ok().filter(|v| !v.is_undefined())
        }
        fn int(&self) -> Option<i64> {
            self.as_f64().filter(|n| n.fract() == 0.0).map(|n| n as i64)
        }
        fn text(&self) -> Option<String> {
            self.as_string()
        }
        fn flag(&self) -> Option<bool> {
            self.as_bool()
        }
        fn items(&self) -> Option<Vec<Self>> {
            self.dyn_ref::<Array>().map(|a| a.iter().collect())
        }
        fn is_null(&self) -> bool {
            JsValue::is_null(self)
        }
    }

    /// POSTs `args` as JSON: whether the answer was a success, and its body parsed
    /// (`None`: unreached, or not JSON).
    pub async fn post(path: &str, args: &js_sys::Object) -> Option<(bool, JsValue)> {
        let init = web_sys::RequestInit::new();
        init.set_method("POST");
        init.set_body(&JSON::stringify(args).ok()?.into());
        let headers = web_sys::Headers::new().ok()?;
        headers.set("content-type", "application/json").ok()?;
        init.set_headers(&headers);
        let window = web_sys::window()?;
        let answer = JsFuture::from(window.fetch_with_str_and_init(path, &init)).await.ok()?;
        let answer: web_sys::Response = answer.dyn_into().ok()?;
        let body = JsFuture::from(answer.json().ok()?).await.ok()?;
        Some((answer.ok(), body))
    }
}

/// serde_json's values: the server's side of the island's code (never called there)
/// and the tests.
#[cfg(any(test, not(feature = "hydrate")))]
mod server {
    use super::Json;
    use serde_json::Value;

    impl Json for Value {
        fn field(&self, key: &str) -> Option<Self> {
            self.as_object()?.get(key).cloned()
        }
        fn int(&self) -> Option<i64> {
            self.as_i64()
        }
        fn text(&self) -> Option<String> {
            self.as_str().map(str::to_owned)
        }
        fn flag(&self) -> Option<bool> {
            self.as_bool()
        }
        fn items(&self) -> Option<Vec<Self>> {
            self.as_array().cloned()
        }
        fn is_null(&self) -> bool {
            Value::is_null(self)
        }
    }
}

/// What serde writes of `value`, read back by its hand decoder (the tests'
/// comparison of the two).
#[cfg(test)]
pub fn round_trip<T: serde::Serialize + FromJson>(value: &T) -> Option<T> {
    T::from_json(&serde_json::to_value(value).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn refusals_read_back() {
        for e in [
            AppError::new(ErrorCode::SoldOut),
            AppError::new(ErrorCode::AlreadyBought).holding(42, "00ff".into()),
            AppError::invalid("bad").on("voucher_id"),
        ] {
            assert_eq!(round_trip(&e), Some(e));
        }
        assert_eq!(parse::<AppError>(r#"{"code":"no_such_code","message":"x"}"#), None);
        assert_eq!(parse::<AppError>("<html>"), None);
    }

    #[test]
    fn every_decoder_reads_what_serde_writes() {
        use crate::{
            auth::{CurrentUser, User},
            listing::Page,
            live::{EventKind, LiveEvent, ShopFrame, StockLive},
            sale::{GateTime, GrabTicket, IssuedToken, Queued},
            voucher::Voucher,
        };
        let voucher = Voucher::sample("Coffee <b>\"50%\"</b> 咖啡");
        let page = Page { items: vec![voucher.clone()], has_more: true, next: Some("7".into()) };
        assert_eq!(round_trip(&page), Some(page));
        let user = User { user_id: 3, name: "ann".into() };
        assert_eq!(round_trip(&user), Some(user.clone()));
        for current in [CurrentUser { user: Some(user) }, CurrentUser { user: None }] {
            assert_eq!(round_trip(&current), Some(current));
        }
        let token = IssuedToken { token: "t".into() };
        assert_eq!(round_trip(&token), Some(token));
        assert_eq!(round_trip(&GateTime { now_ms: 5 }), Some(GateTime { now_ms: 5 }));
        let ticket = GrabTicket { order_id: "9007199254740993".into(), status: Queued::Queued, receipt: "r".into() };
        assert_eq!(round_trip(&ticket), Some(ticket));
        let live = StockLive {
            voucher_id: 7,
            stock: 100,
            left: 4,
            sold_out: false,
            paused: true,
            begins_at_ms: 1,
            ends_at_ms: 2,
        };
        let stock = ShopFrame::Stock { vouchers: vec![live], now_ms: 3 };
        assert_eq!(round_trip(&stock), Some(stock));
        for kind in [
            EventKind::SoldOut,
            EventKind::Restocked,
            EventKind::DeadLettered,
            EventKind::WorkerJoined,
            EventKind::WorkerLeft,
        ] {
            for detail in [None, Some("w-1".to_owned())] {
                let event = ShopFrame::Event(LiveEvent { at_ms: 1, kind, voucher_id: Some(7), detail });
                assert_eq!(round_trip(&event), Some(event));
            }
        }
        // What an older server leaves out, serde's defaults fill in.
        let mut bare = serde_json::to_value(&voucher).unwrap();
        for field in ["price", "face_value", "currency", "paused", "fair_start", "shards"] {
            bare.as_object_mut().unwrap().remove(field);
        }
        let read: Voucher = serde_json::from_value(bare.clone()).unwrap();
        assert_eq!(Voucher::from_json(&bare), Some(read));
    }

    #[test]
    fn a_grab_result_reads_as_its_status() {
        use crate::{
            orders::FailReason,
            sale::{GrabProgress, GrabState},
        };
        assert_eq!(round_trip_as::<GrabProgress>(&GrabState::Queued).map(|p| p.text()).as_deref(), Some("queued"));
        let failed = GrabState::Failed { reason: FailReason::SoldOut };
        assert_eq!(round_trip_as::<GrabProgress>(&failed).map(|p| p.text()).as_deref(), Some("failed (sold_out)"));
        let saved = serde_json::json!({ "status": "success", "order": { "id": "1" } });
        assert_eq!(GrabProgress::from_json(&saved).map(|p| p.text()).as_deref(), Some("success"));
    }

    /// What serde writes of `value`, read as a `T`.
    fn round_trip_as<T: FromJson>(value: &impl serde::Serialize) -> Option<T> {
        T::from_json(&serde_json::to_value(value).unwrap())
    }

    #[test]
    fn optional_and_defaulted_fields_read_as_serde_reads_them() {
        let json: Value = serde_json::json!({ "a": null, "n": 3 });
        assert_eq!(json.maybe("a", Json::int), Some(None));
        assert_eq!(json.maybe("absent", Json::int), Some(None));
        assert_eq!(json.maybe("n", Json::text), None, "a number where text belongs is refused");
        assert_eq!(json.or_default("absent", Json::int), Some(0));
        assert_eq!(json.or_default("n", Json::int), Some(3));
    }
}
