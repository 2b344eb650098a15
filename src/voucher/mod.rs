//! Vouchers: what is sold, N units (its stock) at a price in a time window. The row,
//! its rules, the units left and the list are here; putting one on sale and running
//! the sale are the sale's (`sale::launch`, `sale::run`), which the admin page
//! composes with the list.

pub mod api;
#[cfg(feature = "ssr")]
pub mod buckets;
#[cfg(feature = "ssr")]
pub mod ledger;
#[cfg(feature = "ssr")]
pub mod left;
#[cfg(feature = "ssr")]
pub mod store;
pub mod view;

#[cfg(feature = "ssr")]
use crate::error::AppError;
use crate::wire::{self, FromJson};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A voucher as clients see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
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
    /// What a shopper pays, in the currency's minor units (cents).
    #[serde(default)]
    #[schema(required = true)]
    pub price: i64,
    /// What the voucher is worth, in minor units.
    #[serde(default)]
    #[schema(required = true)]
    pub face_value: i64,
    /// ISO 4217 code (`SECKILL_CURRENCY`) of both amounts.
    #[serde(default)]
    #[schema(required = true)]
    pub currency: String,
    /// An operator paused the sale: grabs are refused until it is resumed.
    #[serde(default)]
    #[schema(required = true)]
    pub paused: bool,
    /// A grab needs a grab token (`grab_token`), issued from the start instant.
    #[serde(default)]
    #[schema(required = true)]
    pub fair_start: bool,
    /// Buckets the units are split over in Redis, each on its own hash slot (1 to 64;
    /// see `create_voucher`).
    #[serde(default = "one_shard")]
    #[schema(required = true)]
    pub shards: u32,
}

fn one_shard() -> u32 {
    1
}

impl FromJson for Voucher {
    fn from_json(json: &impl wire::Json) -> Option<Self> {
        Some(Self {
            id: json.int_at("id")?,
            title: json.text_at("title")?,
            stock: json.int_at("stock")?,
            remaining: json.int_at("remaining")?,
            begins_at: wire::rfc3339(&json.field("begins_at")?)?,
            ends_at: wire::rfc3339(&json.field("ends_at")?)?,
            price: json.or_default("price", wire::Json::int)?,
            face_value: json.or_default("face_value", wire::Json::int)?,
            currency: json.or_default("currency", wire::Json::text)?,
            paused: json.or_default("paused", wire::Json::flag)?,
            fair_start: json.or_default("fair_start", wire::Json::flag)?,
            shards: json.maybe("shards", wire::Json::int)?.map_or(Some(one_shard()), |n| u32::try_from(n).ok())?,
        })
    }
}

#[cfg(test)]
impl Voucher {
    /// A voucher for the tests of how one is written and read: every field holds
    /// something other than its default.
    pub fn sample(title: &str) -> Self {
        let at = |ms| DateTime::from_timestamp_millis(ms).unwrap_or_default();
        Self {
            id: 7,
            title: title.to_owned(),
            stock: 100,
            remaining: 99,
            begins_at: at(1_764_000_000_123),
            ends_at: at(1_764_000_600_000),
            price: 1999,
            face_value: 5000,
            currency: "EUR".into(),
            paused: true,
            fair_start: true,
            shards: 3,
        }
    }
}

impl Voucher {
    /// Where the sale stands at `now` (the gate's time, as the viewer knows it), given
    /// what the live feed says when it has the voucher: paused, its start and end (an
    /// operator may have moved them; 0 when unknown), and whether it is sold out.
    pub fn state(&self, now: DateTime<Utc>, live: Option<(bool, i64, i64, bool)>) -> SaleState {
        let (paused, begins_ms, ends_ms, sold_out) = live.unwrap_or((self.paused, 0, 0, self.remaining == 0));
        let or = |live_ms: i64, listed: DateTime<Utc>| if live_ms > 0 { live_ms } else { listed.timestamp_millis() };
        let (begins, ends) = (or(begins_ms, self.begins_at), or(ends_ms, self.ends_at));
        let now = now.timestamp_millis();
        if now >= ends {
            SaleState::Ended
        } else if now < begins {
            SaleState::Scheduled
        } else if paused {
            SaleState::Paused
        } else if sold_out {
            SaleState::SoldOut
        } else {
            SaleState::Live
        }
    }
}

/// Where a sale stands, as its badge says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaleState {
    Scheduled,
    Live,
    Paused,
    SoldOut,
    Ended,
}

impl SaleState {
    pub fn label(self) -> &'static str {
        match self {
            Self::Scheduled => "Scheduled",
            Self::Live => "Live",
            Self::Paused => "Paused",
            Self::SoldOut => "Sold out",
            Self::Ended => "Ended",
        }
    }

    /// Whether a grab can be granted now.
    pub fn open(self) -> bool {
        self == Self::Live
    }
}

/// `shop_settings`: what every price is counted in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ShopConfig {
    /// ISO 4217 code (`SECKILL_CURRENCY`).
    #[schema(required = true)]
    pub currency: String,
    /// Digits after the decimal point: prices are whole minor units of the currency.
    pub minor_digits: u32,
}

/// Longest accepted title, in characters.
#[cfg(feature = "ssr")]
pub const MAX_TITLE_CHARS: usize = 100;
/// Largest stock one voucher may have: beyond it the warm-up and buyer set get unwieldy.
#[cfg(feature = "ssr")]
pub const MAX_STOCK: i64 = 1_000_000;

/// Most stock changes operators may make to one sale (rows of the ledger: an addition
/// makes one per bucket it reaches, a withdrawal one, made or refused). Every rebuild of
/// a bucket reads and sends its changes to Redis, within its deadline, and they are
/// kept as long as the sale: a script adding and withdrawing in a loop must not make
/// that unbounded. Past it: `stock_change_limit`, counted under the voucher's lock so
/// that calls made at once cannot pass it together. (The moves a withdrawal from a sale
/// of several shards gathers its units with are not counted: at most two rows per
/// other bucket each, so the sale's rows stay within a few times this.)
#[cfg(feature = "ssr")]
pub const MOST_STOCK_CHANGES: i64 = 10_000;

/// Longest a sale may last, in days: a flash sale lasts hours, a promotion weeks. A
/// sale's report counts its answers by the second and its Redis keys last until its
/// end, so a window of years (or a time in year 9999, whose UTC form leaves four
/// digits) is refused rather than kept.
#[cfg(feature = "ssr")]
pub const MAX_SALE_DAYS: i64 = 31;
/// Furthest ahead of now a sale may begin, in days.
#[cfg(feature = "ssr")]
pub const MAX_LEAD_DAYS: i64 = 366;

/// Largest price or face value, in minor units: far above any voucher, far below
/// where sums of them could overflow.
#[cfg(feature = "ssr")]
pub const MAX_AMOUNT: i64 = 1_000_000_000_000;

/// A checked `create_voucher` request.
#[cfg(feature = "ssr")]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewVoucher {
    pub title: String,
    pub stock: i64,
    pub begins_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub price: i64,
    pub face_value: i64,
    /// Grabs need a grab token, issued from the start.
    pub fair_start: bool,
    /// Buckets of its sale in Redis.
    pub shards: u32,
}

/// What a voucher's fields must be, whoever sets them (creating or editing).
#[cfg(feature = "ssr")]
pub mod rules {
    use super::{MAX_AMOUNT, MAX_LEAD_DAYS, MAX_SALE_DAYS, MAX_TITLE_CHARS};
    use crate::error::{AppError, ErrorCode};
    use chrono::{DateTime, Utc};

    /// A title, trimmed: a line of at most [`MAX_TITLE_CHARS`] characters as sent
    /// (`text::line`, whose pattern the API document states).
    pub fn title(title: &str) -> Result<String, AppError> {
        crate::text::line(title, MAX_TITLE_CHARS, "title")
    }

    /// A price and face value: neither negative nor absurd, and the voucher worth at
    /// least what it costs.
    pub fn amounts(price: i64, face_value: i64) -> Result<(), AppError> {
        let field = match (price, face_value) {
            (price, _) if !(0..=MAX_AMOUNT).contains(&price) => Some("price"),
            (_, face_value) if !(0..=MAX_AMOUNT).contains(&face_value) => Some("face_value"),
            _ => None,
        };
        if let Some(field) = field {
            let message = format!("Prices are whole minor units (cents) from 0 to {MAX_AMOUNT}.");
            return Err(AppError::with(ErrorCode::InvalidPrice, message).on(field));
        }
        if face_value < price {
            return Err(AppError::new(ErrorCode::FaceValueBelowPrice).on("face_value"));
        }
        Ok(())
    }

    /// How many buckets a sale's units are split over: 1 (left out) to
    /// [`MAX_SHARDS`](crate::backend::layout::MAX_SHARDS).
    pub fn shards(shards: Option<i64>) -> Result<u32, AppError> {
        let most = crate::backend::layout::MAX_SHARDS;
        match shards.unwrap_or(1) {
            n if (1..=i64::from(most)).contains(&n) => Ok(n as u32),
            _ => Err(AppError::invalid(format!("shards must be between 1 and {most}.")).on("shards")),
        }
    }

    /// A time in RFC 3339, as `field` of the request, to the millisecond: what the
    /// database stores, so that the checks below judge the window it will hold (an end
    /// under a millisecond after the start was an empty window there, which it refused).
    pub fn time(field: &str, value: &str) -> Result<DateTime<Utc>, AppError> {
        use chrono::SubsecRound;
        DateTime::parse_from_rfc3339(value.trim()).map(|t| t.with_timezone(&Utc).trunc_subsecs(3)).map_err(|_| {
            AppError::with(
                ErrorCode::InvalidTime,
                format!("{field} must be an RFC 3339 time, like 2026-11-23T10:00:00Z."),
            )
            .on(field)
        })
    }

    /// A window: ends after it begins, and not in the past.
    pub fn window(begins_at: DateTime<Utc>, ends_at: DateTime<Utc>, now: DateTime<Utc>) -> Result<(), AppError> {
        if ends_at <= begins_at {
            return Err(refused("The sale must end after it begins.".to_owned(), "ends_at"));
        }
        if ends_at <= now {
            return Err(refused("The sale would already be over.".to_owned(), "ends_at"));
        }
        Ok(())
    }

    /// A window's bounds: it lasts at most [`MAX_SALE_DAYS`] (checked when `longer`:
    /// made, or made longer) and begins at most [`MAX_LEAD_DAYS`] from now (when
    /// `moved`: its start set), so both ends are within a year or so of now.
    pub fn bounds(
        window: (DateTime<Utc>, DateTime<Utc>),
        now: DateTime<Utc>,
        (longer, moved): (bool, bool),
    ) -> Result<(), AppError> {
        let (begins_at, ends_at) = window;
        if longer && ends_at - begins_at > chrono::TimeDelta::days(MAX_SALE_DAYS) {
            return Err(refused(format!("A sale lasts at most {MAX_SALE_DAYS} days."), "ends_at"));
        }
        if moved && begins_at - now > chrono::TimeDelta::days(MAX_LEAD_DAYS) {
            return Err(refused(format!("A sale begins at most {MAX_LEAD_DAYS} days from now."), "begins_at"));
        }
        Ok(())
    }

    fn refused(why: String, field: &str) -> AppError {
        AppError::with(ErrorCode::InvalidTime, why).on(field)
    }
}

#[cfg(feature = "ssr")]
impl NewVoucher {
    /// Checks every field; `now` is passed in so the rule "ends in the future" is testable.
    pub fn parse(
        title: &str,
        stock: i64,
        (begins_at, ends_at): (&str, &str),
        (price, face_value): (i64, i64),
        now: DateTime<Utc>,
    ) -> Result<Self, AppError> {
        let title = rules::title(title)?;
        if !(1..=MAX_STOCK).contains(&stock) {
            return Err(AppError::invalid(format!("Stock must be between 1 and {MAX_STOCK}.")).on("stock"));
        }
        let begins_at = rules::time("begins_at", begins_at)?;
        let ends_at = rules::time("ends_at", ends_at)?;
        rules::window(begins_at, ends_at, now)?;
        rules::bounds((begins_at, ends_at), now, (true, true))?;
        rules::amounts(price, face_value)?;
        Ok(Self { title, stock, begins_at, ends_at, price, face_value, fair_start: false, shards: 1 })
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn now() -> DateTime<Utc> {
        "2026-11-23T10:00:00Z".parse().unwrap()
    }

    fn parse(title: &str, stock: i64, b: &str, e: &str) -> Result<NewVoucher, AppError> {
        NewVoucher::parse(title, stock, (b, e), (100, 250), now())
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
        // Times whose UTC form leaves years 0000-9999 (which no client reads back), a
        // window of more than a month, a start more than a year away.
        let refused_on = |b, e| parse("t", 1, b, e).map_err(|e| (e.code, e.param)).unwrap_err();
        let on = |field: &str| (ErrorCode::InvalidTime, Some(field.to_owned()));
        assert_eq!(refused_on("0000-01-01T00:00:00+01:00", e), on("ends_at"));
        assert_eq!(refused_on(b, "9999-12-31T23:59:59-05:00"), on("ends_at"));
        assert_eq!(refused_on(b, "2026-12-24T10:00:01Z"), on("ends_at"));
        assert!(parse("t", 1, b, "2026-12-24T10:00:00Z").is_ok(), "31 days");
        assert_eq!(refused_on("2027-11-25T10:00:00Z", "2027-11-25T11:00:00Z"), on("begins_at"));
        assert!(parse("t", 1, "2027-11-24T10:00:00Z", "2027-11-24T11:00:00Z").is_ok(), "366 days ahead");
        assert_eq!(parse("", 1, b, e).unwrap_err().code, ErrorCode::InvalidInput);
        assert_eq!(parse("t", 1, "x", e).unwrap_err().code, ErrorCode::InvalidTime);
        let at = |price, face| NewVoucher::parse("t", 1, (b, e), (price, face), now()).map(|v| v.price);
        assert_eq!(at(0, 0).unwrap(), 0, "a free voucher");
        assert_eq!(at(-1, 5).unwrap_err().code, ErrorCode::InvalidPrice);
        assert_eq!(at(5, MAX_AMOUNT + 1).unwrap_err().code, ErrorCode::InvalidPrice);
        assert_eq!(at(500, 499).unwrap_err().code, ErrorCode::FaceValueBelowPrice);
    }
}
