//! `#[serde(deserialize_with = "crate::rfc3339::deserialize")]` for the `DateTime<Utc>`
//! fields the browser reads. chrono's own `Deserialize` goes through its general
//! format parser (RFC 2822 and strftime patterns included), code the browser would
//! download for nothing: these fields are always written by chrono as RFC 3339, which
//! its dedicated parser reads. The JSON is unchanged.

use chrono::{DateTime, Utc};
use serde::{de::Error, Deserialize, Deserializer};

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
    let text = String::deserialize(d)?;
    DateTime::parse_from_rfc3339(&text).map(|t| t.with_timezone(&Utc)).map_err(D::Error::custom)
}

/// [`deserialize`] for an optional time (`null` or absent: `None`; with `default`).
pub fn deserialize_option<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    let Some(text) = Option::<String>::deserialize(d)? else { return Ok(None) };
    DateTime::parse_from_rfc3339(&text).map(|t| Some(t.with_timezone(&Utc))).map_err(D::Error::custom)
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, TimeZone, Utc};
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct At(#[serde(deserialize_with = "super::deserialize")] DateTime<Utc>);

    #[test]
    fn reads_what_chrono_writes() {
        for at in [Utc.timestamp_millis_opt(1_764_000_000_123).unwrap(), Utc.timestamp_opt(1_764_000_000, 0).unwrap()] {
            let json = serde_json::to_string(&At(at)).unwrap();
            assert_eq!(serde_json::from_str::<At>(&json).unwrap(), At(at), "{json}");
        }
        assert!(
            serde_json::from_str::<At>("\"2026-11-24 05:00:00+01:00\"").is_ok_and(|a| a.0.timestamp() == 1_795_492_800)
        );
        assert!(serde_json::from_str::<At>("\"Tue, 24 Nov 2026 05:00:00 GMT\"").is_err());
    }
}
