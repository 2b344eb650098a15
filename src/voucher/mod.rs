//! Seckill vouchers: N units on sale in a time window. Creating one warms it into
//! Redis; warm-up never gives back stock Redis already sold. The operator's voucher
//! form and list are here; the admin page composes them.

pub mod api;
#[cfg(feature = "ssr")]
pub mod store;
pub mod view;

#[cfg(feature = "ssr")]
use crate::error::AppError;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A voucher as clients see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Voucher {
    pub id: i64,
    pub title: String,
    /// Units put on sale.
    pub stock: i64,
    /// Units not yet granted: Redis during the sale, the database when Redis lacks it.
    pub remaining: i64,
    #[serde(deserialize_with = "crate::rfc3339::deserialize")]
    pub begins_at: DateTime<Utc>,
    #[serde(deserialize_with = "crate::rfc3339::deserialize")]
    pub ends_at: DateTime<Utc>,
}

/// Longest accepted title, in characters.
#[cfg(feature = "ssr")]
pub const MAX_TITLE_CHARS: usize = 100;
/// Largest stock one voucher may have: beyond it the warm-up and buyer set get unwieldy.
#[cfg(feature = "ssr")]
pub const MAX_STOCK: i64 = 1_000_000;

/// A checked `create_voucher` request.
#[cfg(feature = "ssr")]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewVoucher {
    pub title: String,
    pub stock: i64,
    pub begins_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
}

#[cfg(feature = "ssr")]
impl NewVoucher {
    /// Checks every field; `now` is passed in so the rule "ends in the future" is testable.
    pub fn parse(
        title: &str,
        stock: i64,
        begins_at: &str,
        ends_at: &str,
        now: DateTime<Utc>,
    ) -> Result<Self, AppError> {
        let title = title.trim();
        if title.is_empty() {
            return Err(AppError::invalid("The title is empty."));
        }
        if title.chars().count() > MAX_TITLE_CHARS {
            return Err(AppError::invalid(format!("A title has at most {MAX_TITLE_CHARS} characters.")));
        }
        if title.chars().any(char::is_control) {
            return Err(AppError::invalid("A title cannot contain control characters."));
        }
        if !(1..=MAX_STOCK).contains(&stock) {
            return Err(AppError::invalid(format!("Stock must be between 1 and {MAX_STOCK}.")));
        }
        let begins_at = parse_time("begins_at", begins_at)?;
        let ends_at = parse_time("ends_at", ends_at)?;
        if ends_at <= begins_at {
            return Err(AppError::invalid("The sale must end after it begins."));
        }
        if ends_at <= now {
            return Err(AppError::invalid("The sale would already be over."));
        }
        Ok(Self { title: title.to_owned(), stock, begins_at, ends_at })
    }
}

#[cfg(feature = "ssr")]
fn parse_time(field: &str, value: &str) -> Result<DateTime<Utc>, AppError> {
    DateTime::parse_from_rfc3339(value.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| AppError::invalid(format!("{field} must be an RFC 3339 time, like 2026-11-23T10:00:00Z.")))
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        "2026-11-23T10:00:00Z".parse().unwrap()
    }

    fn parse(title: &str, stock: i64, b: &str, e: &str) -> Result<NewVoucher, AppError> {
        NewVoucher::parse(title, stock, b, e, now())
    }

    #[test]
    fn accepts_a_sensible_voucher() {
        let v = parse(" Coffee ", 100, "2026-11-23T10:00:00Z", "2026-11-23T11:00:00+01:00").unwrap_err();
        assert!(v.message.contains("end after"), "11:00+01:00 is 10:00Z: {v:?}");
        let v = parse(" Coffee ", 100, "2026-11-23T10:00:00Z", "2026-11-23T12:00:00+01:00").unwrap();
        assert_eq!(v.title, "Coffee");
        assert_eq!(v.ends_at.to_rfc3339(), "2026-11-23T11:00:00+00:00");
    }

    #[test]
    fn refuses_bad_fields() {
        let (b, e) = ("2026-11-23T10:00:00Z", "2026-11-23T11:00:00Z");
        assert!(parse("", 1, b, e).is_err());
        assert!(parse(&"t".repeat(101), 1, b, e).is_err());
        assert!(parse("a\u{0}\u{1b}[2J", 1, b, e).is_err());
        assert!(parse("t", 0, b, e).is_err());
        assert!(parse("t", -5, b, e).is_err());
        assert!(parse("t", MAX_STOCK + 1, b, e).is_err());
        assert!(parse("t", 1, "yesterday", e).is_err());
        assert!(parse("t", 1, e, b).is_err());
        assert!(parse("t", 1, "2026-11-22T10:00:00Z", "2026-11-22T11:00:00Z").is_err());
        for err in [parse("", 1, b, e), parse("t", 1, "x", e)] {
            assert_eq!(err.unwrap_err().code, crate::error::ErrorCode::InvalidInput);
        }
    }
}
