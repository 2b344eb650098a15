//! Amounts of money: integer minor units (cents) of one currency per deployment
//! (`SECKILL_CURRENCY`, an ISO 4217 code), shown as `19.99 EUR` on the server's page
//! and in the browser alike (one text, so hydration agrees).

/// Digits after the decimal point of `code`'s amounts (ISO 4217's exponent): 2 but
/// for the currencies without minor units and the few with three.
pub fn minor_digits(code: &str) -> u32 {
    match code {
        "BIF" | "CLP" | "DJF" | "GNF" | "ISK" | "JPY" | "KMF" | "KRW" | "PYG" | "RWF" | "UGX" | "UYI" | "VND"
        | "VUV" | "XAF" | "XOF" | "XPF" => 0,
        "BHD" | "IQD" | "JOD" | "KWD" | "LYD" | "OMR" | "TND" => 3,
        _ => 2,
    }
}

/// `minor` units of `code` as text: `19.99 EUR`, `500 JPY`, `-0.05 USD`.
pub fn format(minor: i64, code: &str) -> String {
    let digits = minor_digits(code);
    let sign = if minor < 0 { "-" } else { "" };
    let abs = minor.unsigned_abs();
    if digits == 0 {
        return format!("{sign}{abs} {code}");
    }
    let unit = 10u64.pow(digits);
    format!("{sign}{}.{:0width$} {code}", abs / unit, abs % unit, width = digits as usize)
}

/// An amount as people type it (`19.99`, `19.9`, `19`, `0.5`) in minor units of
/// `code`; `None` for anything else (a sign, more decimals than the currency has, text).
pub fn parse(text: &str, code: &str) -> Option<i64> {
    let digits = minor_digits(code) as usize;
    let (whole, fraction) = text.trim().split_once('.').unwrap_or((text.trim(), ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !all_digits(whole) || !all_digits(fraction) || fraction.len() > digits {
        return None;
    }
    let unit = 10i64.pow(digits as u32);
    let fraction = if fraction.is_empty() { 0 } else { format!("{fraction:0<digits$}").parse::<i64>().ok()? };
    whole.parse::<i64>().ok()?.checked_mul(unit)?.checked_add(fraction)
}

/// `minor` units of `code` as typed into [`parse`]: `19.99`, `500`.
pub fn plain(minor: i64, code: &str) -> String {
    let shown = format(minor, code);
    shown.rsplit_once(' ').map_or(shown.clone(), |(amount, _)| amount.to_owned())
}

/// Whether `code` looks like an ISO 4217 code (three capital letters).
#[cfg(feature = "ssr")]
pub fn is_code(code: &str) -> bool {
    code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase())
}

#[cfg(feature = "ssr")]
static CURRENCY: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The deployment's currency, set once at start-up from `SECKILL_CURRENCY` (a second
/// call, from another server in the same process, keeps the first: one currency per
/// process).
#[cfg(feature = "ssr")]
pub fn set_currency(code: &str) {
    let _ = CURRENCY.set(code.to_owned());
}

/// The deployment's currency (`EUR` until it is set).
#[cfg(feature = "ssr")]
pub fn currency() -> &'static str {
    CURRENCY.get().map_or("EUR", String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_as_their_currency_writes_them() {
        assert_eq!(format(1999, "EUR"), "19.99 EUR");
        assert_eq!(format(5, "USD"), "0.05 USD");
        assert_eq!(format(-5, "USD"), "-0.05 USD");
        assert_eq!(format(500, "JPY"), "500 JPY");
        assert_eq!(format(1234, "KWD"), "1.234 KWD");
        assert_eq!(format(i64::MIN, "EUR"), "-92233720368547758.08 EUR");
        #[cfg(feature = "ssr")]
        assert!(is_code("EUR") && !is_code("eur") && !is_code("EURO"));
    }

    #[test]
    fn typed_amounts_read_in_minor_units() {
        assert_eq!(parse("19.99", "EUR"), Some(1999));
        assert_eq!(parse(" 19.9 ", "EUR"), Some(1990));
        assert_eq!(parse("19", "EUR"), Some(1900));
        assert_eq!(parse("0.05", "USD"), Some(5));
        assert_eq!(parse("500", "JPY"), Some(500));
        for bad in ["", "-1", "1.999", "1,50", "x", ".5", "1e3", "99999999999999999999"] {
            assert_eq!(parse(bad, "EUR"), None, "{bad}");
        }
        assert_eq!(parse("1.5", "JPY"), None);
        assert_eq!(plain(1999, "EUR"), "19.99");
        assert_eq!(parse(&plain(1234, "KWD"), "KWD"), Some(1234));
    }
}
