//! The one error type every server function returns.
//!
//! It travels as JSON `{"code": "...", "message": "..."}`: `code` is stable and
//! machine-readable (clients branch on it), `message` is for people. The HTTP
//! status is derived from the code in one place ([`ErrorCode::status`]), so the
//! same refusal always gets the same status, whether it came from our code or
//! from the server-function layer rejecting a malformed body.

use serde::{Deserialize, Serialize};
use server_fn::{
    codec::JsonEncoding,
    error::{FromServerFnError, ServerFnErrorErr},
};

/// Why a call was refused. Serialised in `snake_case`; these names are API (the
/// document's error codes, the tests' stable codes: `ErrorCode::VARIANTS`).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
    strum::VariantArray,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ErrorCode {
    /// The body was malformed, a field missing or of the wrong type, or a value out of range.
    InvalidInput,
    /// A shopper call without a valid session cookie.
    NotSignedIn,
    /// An operator call without an operator's cookie or the admin token (the wire
    /// code, `admin_required`, predates the word operator).
    #[serde(rename = "admin_required")]
    #[strum(serialize = "admin_required")]
    OperatorRequired,
    /// A sign-in or password change with a wrong name or password (which of the two
    /// is never said).
    BadCredentials,
    /// Signing up with a name somebody already has.
    NameTaken,
    /// No operator by that name.
    UnknownOperator,
    /// A sign-up without a solved challenge (or one solved already, or expired): a
    /// fresh one comes in the `Seckill-Challenge` header.
    ChallengeRequired,
    /// Sign-ups are off here (`SECKILL_SIGN_UP=off`, or the shop's own login is on).
    SignUpClosed,
    /// Removing or demoting the last admin (somebody must be able to add operators).
    LastAdmin,
    /// No such voucher, or it was never warmed into Redis.
    UnknownVoucher,
    /// No such order for this shopper (other shoppers' orders are not visible).
    UnknownOrder,
    /// The sale window has not opened yet.
    NotStarted,
    /// The sale window has closed.
    Ended,
    /// No stock left.
    SoldOut,
    /// This shopper already holds an order for the voucher.
    AlreadyBought,
    /// An operator paused the sale.
    SalePaused,
    /// A grab of a sale with a fair start without the shopper's own grab token.
    InvalidToken,
    /// A change only a sale that has not started may take (its start, its stock's
    /// first count).
    SaleStarted,
    /// A withdrawal of more units than are unsold.
    NotEnoughStock,
    /// The sale has taken as many stock changes as one sale may
    /// (`voucher::MOST_STOCK_CHANGES`): its stock can change no more.
    StockChangeLimit,
    /// A negative or absurd price or face value.
    InvalidPrice,
    /// A face value below the price.
    FaceValueBelowPrice,
    /// A time that is not RFC 3339, or a window that ends before it begins or in the past.
    InvalidTime,
    /// The order was granted but is not saved yet; retry in a moment.
    OrderQueued,
    /// The order's payment deadline passed; it is (or is about to be) cancelled.
    OrderExpired,
    /// The order was cancelled; it can no longer be paid.
    OrderCancelled,
    /// The order is paid; it can no longer be cancelled.
    OrderPaid,
    /// The shopper has cancelled as many of this sale's orders as one shopper may
    /// (`orders::lifecycle::MOST_SHOPPER_CANCELS`): this one can be paid, or left to
    /// lapse at its deadline.
    CancelLimit,
    /// No such `/api/...` endpoint.
    NotFound,
    /// The endpoint exists but not for this HTTP method (API calls are POST).
    MethodNotAllowed,
    /// A state-changing call whose body is not `application/json`.
    UnsupportedMediaType,
    /// A state-changing call sent from another site (its `Origin` or
    /// `Sec-Fetch-Site` says so): refused so no other site can act for a shopper.
    CrossSite,
    /// Too many calls from this session or address; retry after `Retry-After` seconds.
    RateLimited,
    /// Redis or the database is unreachable, or the server is stopping; retry.
    Unavailable,
    /// An operator's change the database holds that Redis could not be given yet: it
    /// follows within seconds. Do not send it again.
    SavedNotApplied,
    /// An `Idempotency-Key` sent before with another call (another path or body).
    IdempotencyKeyReused,
    /// An `Idempotency-Key` whose first call is still being served; retry in a moment.
    IdempotencyInProgress,
    /// The browser could not reach the server (client side only).
    Network,
    /// A bug on our side. Details are in the server log, never in the answer.
    Internal,
}

impl ErrorCode {
    /// The code with this wire name (`sold_out` → `SoldOut`).
    pub fn from_name(name: &str) -> Option<Self> {
        name.parse().ok()
    }

    /// The wire name (`SoldOut` → `sold_out`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The HTTP status for this code: 4xx for the caller's fault, 5xx only for ours.
    pub fn status(self) -> u16 {
        match self {
            Self::InvalidInput | Self::InvalidPrice | Self::FaceValueBelowPrice | Self::InvalidTime => 400,
            Self::ChallengeRequired => 400,
            Self::SignUpClosed => 403,
            Self::NotSignedIn | Self::OperatorRequired | Self::BadCredentials => 401,
            Self::NameTaken | Self::LastAdmin => 409,
            Self::UnknownOperator => 404,
            Self::UnknownVoucher | Self::UnknownOrder => 404,
            Self::NotStarted | Self::Ended | Self::SoldOut | Self::AlreadyBought => 409,
            Self::SalePaused | Self::SaleStarted | Self::NotEnoughStock | Self::StockChangeLimit => 409,
            Self::InvalidToken => 403,
            Self::OrderQueued | Self::OrderExpired | Self::OrderCancelled | Self::OrderPaid | Self::CancelLimit => 409,
            Self::NotFound => 404,
            Self::MethodNotAllowed => 405,
            Self::UnsupportedMediaType => 415,
            Self::CrossSite => 403,
            Self::RateLimited => 429,
            Self::Unavailable | Self::SavedNotApplied => 503,
            Self::IdempotencyKeyReused => 422,
            Self::IdempotencyInProgress => 409,
            Self::Network => 502,
            Self::Internal => 500,
        }
    }

    /// A sentence a shopper or operator can act on.
    pub fn default_message(self) -> &'static str {
        match self {
            Self::InvalidInput => "The request was not valid.",
            Self::NotSignedIn => "Please sign in first.",
            Self::OperatorRequired => "This needs an operator's sign-in or the admin token.",
            Self::BadCredentials => "Wrong name or password.",
            Self::NameTaken => "That name, or one that reads the same, is taken; please choose another.",
            Self::UnknownOperator => "There is no operator by that name.",
            Self::ChallengeRequired => "Please try again: the sign-up check did not go through.",
            Self::SignUpClosed => "New accounts are not made here.",
            Self::LastAdmin => "This is the last admin: make another admin first.",
            Self::UnknownVoucher => "There is no such sale.",
            Self::UnknownOrder => "There is no such order.",
            Self::NotStarted => "The sale has not started yet.",
            Self::Ended => "The sale has ended.",
            Self::SoldOut => "Sold out.",
            Self::AlreadyBought => "You already bought this voucher.",
            Self::SalePaused => "The sale is paused; please try again when it resumes.",
            Self::InvalidToken => "This grab needs your own grab token, given from the sale's start.",
            Self::SaleStarted => "The sale has started: only its title, price and end can change.",
            Self::NotEnoughStock => "Fewer units are unsold than that.",
            Self::StockChangeLimit => {
                "This sale's stock has been changed as often as one sale's may: make another sale for more units."
            }
            Self::InvalidPrice => "A price must be whole minor units (cents), not negative.",
            Self::FaceValueBelowPrice => "The face value cannot be below the price.",
            Self::InvalidTime => "That time is not possible.",
            Self::OrderQueued => "Your order is still being saved; try again in a moment.",
            Self::OrderExpired => "The time to pay this order has run out.",
            Self::OrderCancelled => "This order was cancelled.",
            Self::OrderPaid => "This order is paid and can no longer be cancelled.",
            Self::CancelLimit => {
                "You have cancelled this sale's orders as often as one shopper may: pay this order, or let it lapse at its deadline."
            }
            Self::NotFound => "There is no such API call.",
            Self::MethodNotAllowed => "This call takes another HTTP method: the one its Allow header names.",
            Self::UnsupportedMediaType => "Send the body as JSON (Content-Type: application/json).",
            Self::CrossSite => "Requests from other sites are refused.",
            Self::RateLimited => "Too many requests; please wait a moment.",
            Self::Unavailable => "The service is busy; please try again.",
            Self::SavedNotApplied => "Saved; the sale follows within seconds. Do not send it again.",
            Self::IdempotencyKeyReused => {
                "This Idempotency-Key was sent with another call: send this one with a new key."
            }
            Self::IdempotencyInProgress => {
                "The first call with this Idempotency-Key is still being served; retry in a moment."
            }
            Self::Network => "Could not reach the server; please try again.",
            Self::Internal => "Something went wrong on our side.",
        }
    }
}

/// A refusal as clients see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error, utoipa::ToSchema)]
#[error("{message}")]
pub struct AppError {
    pub code: ErrorCode,
    pub message: String,
    /// The request field the refusal is about, when it is about one (Stripe's
    /// `param`): `title`, `voucher_id`, `limit`, a nested one by its path
    /// (`challenge.number`), or the `Idempotency-Key` header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// With `already_bought`: the order the shopper holds for the voucher, so a grab
    /// sent again (its answer lost) learns it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_id: Option<String>,
    /// With `already_bought`: that order's receipt, as a granted grab answers it, so
    /// the grab sent again follows it with `grab_result` as the first would have, and
    /// hears `lost` if Redis lost it before it was saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
}

impl AppError {
    pub fn new(code: ErrorCode) -> Self {
        Self::with(code, code.default_message())
    }

    /// A refusal with its own message.
    pub fn with(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), param: None, order_id: None, receipt: None }
    }

    /// An `invalid_input` refusal that says what is wrong (and, with [`AppError::on`],
    /// in which field).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::with(ErrorCode::InvalidInput, message)
    }

    /// This refusal, naming the order the shopper holds (`already_bought`) and its
    /// receipt.
    pub fn holding(mut self, order_id: i64, receipt: String) -> Self {
        self.order_id = Some(order_id.to_string());
        self.receipt = Some(receipt);
        self
    }

    /// This refusal, about the request field `param`.
    pub fn on(mut self, param: &str) -> Self {
        self.param = Some(param.to_owned());
        self
    }

    /// Logs an internal failure and returns a refusal that reveals nothing of it.
    #[cfg(feature = "ssr")]
    pub fn internal(context: &str, err: impl std::fmt::Display) -> Self {
        tracing::error!("{context}: {err}");
        Self::new(ErrorCode::Internal)
    }

    /// A `rate_limited` refusal that says when to try again, in its message and (inside
    /// a server function) in `Retry-After`.
    #[cfg(feature = "ssr")]
    pub fn rate_limited(wait: std::time::Duration) -> Self {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let secs = secs.max(1);
        if let Some(response) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>() {
            response.insert_header(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(secs));
        }
        Self::with(ErrorCode::RateLimited, format!("Too many attempts; please try again in {secs} s."))
    }

    /// Gives the page the server is rendering this error's status, so a page that
    /// could not load what it shows is never taken for a good one: the shared shop page
    /// keeps only a `200`, and monitors see the 5xx. Does nothing in the browser or
    /// outside a page render.
    pub fn set_page_status(&self) {
        #[cfg(feature = "ssr")]
        if let Some(page) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>() {
            let status = axum::http::StatusCode::from_u16(self.code.status());
            page.set_status(status.unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR));
        }
    }
}

/// The one way a refusal becomes an HTTP answer, for handlers outside the
/// server-function layer (middleware, the live feed, the sale routes): the JSON shape,
/// with the status its code calls for.
#[cfg(feature = "ssr")]
impl axum::response::IntoResponse for AppError {
    fn into_response(self) -> axum::response::Response {
        let status = axum::http::StatusCode::from_u16(self.code.status())
            .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self)).into_response()
    }
}

impl From<ErrorCode> for AppError {
    fn from(code: ErrorCode) -> Self {
        Self::new(code)
    }
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        match value {
            // The server could not decode what the caller sent. (On the server,
            // "deserialization" is of the request; in the browser, of our answer.)
            ServerFnErrorErr::Args(msg) | ServerFnErrorErr::MissingArg(msg) => invalid_body(&msg),
            ServerFnErrorErr::Deserialization(msg) if cfg!(feature = "ssr") => invalid_body(&msg),
            // The browser could not reach us, or could not read our answer.
            ServerFnErrorErr::Request(_) | ServerFnErrorErr::Deserialization(_) => Self::new(ErrorCode::Network),
            _ => Self::new(ErrorCode::Internal),
        }
    }
}

/// The decoder's words, cut short: they may quote the input, which can be huge. The
/// field at fault is named by `body::fault`, which decodes the body again.
pub(crate) fn invalid_body(detail: &str) -> AppError {
    const MAX_DETAIL_CHARS: usize = 200;
    let cut: String = detail.chars().take(MAX_DETAIL_CHARS).collect();
    let more = if cut.len() < detail.len() { "…" } else { "" };
    AppError::invalid(format!("The request body is not valid: {cut}{more}"))
}

/// The decoder's words about the field `field` (a path into the body), cut short as
/// [`invalid_body`]'s, the field named in `param` too (unless it is longer than any
/// field the API has: then it is a caller's invention, and only the words name it).
#[cfg(feature = "ssr")]
pub(crate) fn invalid_field(field: &str, detail: &str) -> AppError {
    let refused = invalid_body(&format!("{field}: {detail}"));
    match field.len() <= 64 {
        true => refused.on(field),
        false => refused,
    }
}

/// A server function's own refusals: what its handler (and what it calls) can answer,
/// beyond the front door's (`server::refusals`).
#[cfg(feature = "ssr")]
pub trait Refusals {
    const OWN: &'static [ErrorCode];
}

/// Declares a server function's own refusals, next to its handler: `refuses!(Grab:
/// SoldOut, Ended)`. The access table takes no server function without them.
macro_rules! refuses {
    ($f:ty: $($code:ident),* $(,)?) => {
        #[cfg(feature = "ssr")]
        impl $crate::error::Refusals for $f {
            const OWN: &'static [$crate::error::ErrorCode] = &[$($crate::error::ErrorCode::$code),*];
        }
    };
}
pub(crate) use refuses;

/// `Result` of a server function.
pub type AppResult<T> = Result<T, AppError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caller_faults_are_4xx_and_ours_5xx() {
        for code in [
            ErrorCode::InvalidInput,
            ErrorCode::NotSignedIn,
            ErrorCode::OperatorRequired,
            ErrorCode::UnknownVoucher,
            ErrorCode::UnknownOrder,
            ErrorCode::NotStarted,
            ErrorCode::Ended,
            ErrorCode::SoldOut,
            ErrorCode::AlreadyBought,
            ErrorCode::NotFound,
            ErrorCode::MethodNotAllowed,
            ErrorCode::UnsupportedMediaType,
            ErrorCode::CrossSite,
            ErrorCode::RateLimited,
        ] {
            assert!((400..500).contains(&code.status()), "{code:?}");
        }
        assert_eq!(ErrorCode::Internal.status(), 500);
        assert_eq!(ErrorCode::Unavailable.status(), 503);
    }

    /// `as_str` and `from_name` say the name serde writes, for every code.
    #[test]
    fn every_code_has_one_wire_name() {
        use strum::VariantArray;
        for &code in ErrorCode::VARIANTS {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str(), "{code:?}");
            assert_eq!(ErrorCode::from_name(code.as_str()), Some(code));
        }
    }

    #[test]
    fn wire_format_names_a_stable_code() {
        let json = serde_json::to_value(AppError::new(ErrorCode::AlreadyBought)).unwrap();
        assert_eq!(json["code"], "already_bought");
        assert_eq!(json["message"], "You already bought this voucher.");
    }

    #[test]
    fn a_param_is_sent_only_when_there_is_one() {
        assert_eq!(invalid_body("invalid type: string, expected i64").param, None);
        let json = serde_json::to_value(AppError::new(ErrorCode::SoldOut)).unwrap();
        assert!(json.get("param").is_none(), "sent only when there is one: {json}");
    }

    #[test]
    fn undecodable_arguments_map_to_invalid_input() {
        let err = AppError::from_server_fn_error(ServerFnErrorErr::Args("expected u64".into()));
        assert_eq!(err.code, ErrorCode::InvalidInput);
        let err = AppError::from_server_fn_error(ServerFnErrorErr::ServerError("db".into()));
        assert_eq!(err.code, ErrorCode::Internal);
        assert!(!err.message.contains("db"));
    }
}
