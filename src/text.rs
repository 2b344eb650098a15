//! A line of text a caller names something with (a shopper's or an operator's name, a
//! sale's title): checked the same way everywhere, and stated in the API document as
//! one pattern made from the same character sets, so the two cannot drift.

use crate::error::AppError;

/// Why a line was refused.
#[derive(Debug, PartialEq, Eq)]
enum Fault {
    /// More characters than allowed, counted as sent (spaces included: the length
    /// the API document states).
    TooLong,
    /// A control character anywhere.
    Control,
    /// Nothing but spaces.
    Blank,
}

/// The `field` a caller sent, with its ends' spaces trimmed, if it is a line of at
/// most `most` characters: no control character, one at least that is not a space
/// ([`pattern`]); else `invalid_input` about `field`, saying why.
pub fn line(sent: &str, most: usize, field: &str) -> Result<String, AppError> {
    let refused = |message: String| Err(AppError::invalid(message).on(field));
    match check(sent, most) {
        Ok(line) => Ok(line.to_owned()),
        Err(Fault::TooLong) => refused(format!("A {field} has at most {most} characters.")),
        Err(Fault::Control) => refused(format!("A {field} cannot contain control characters.")),
        Err(Fault::Blank) => refused(format!("Please enter a {field}.")),
    }
}

fn check(sent: &str, most: usize) -> Result<&str, Fault> {
    if sent.chars().count() > most {
        return Err(Fault::TooLong);
    }
    if sent.chars().any(char::is_control) {
        return Err(Fault::Control);
    }
    Some(sent.trim()).filter(|line| !line.is_empty()).ok_or(Fault::Blank)
}

/// The control characters (`char::is_control`: C0, DEL, C1), and the spaces `trim`
/// takes off the ends that are not among them (`char::is_whitespace`), as ranges: the
/// pattern is made of them, and a test holds them to the two functions.
const CONTROLS: [(char, char); 2] = [('\0', '\u{1f}'), ('\u{7f}', '\u{9f}')];
const SPACES: [(char, char); 8] = [
    (' ', ' '),
    ('\u{a0}', '\u{a0}'),
    ('\u{1680}', '\u{1680}'),
    ('\u{2000}', '\u{200a}'),
    ('\u{2028}', '\u{2029}'),
    ('\u{202f}', '\u{202f}'),
    ('\u{205f}', '\u{205f}'),
    ('\u{3000}', '\u{3000}'),
];

/// What [`line`] takes, as an ECMA-262 pattern (the length is stated apart): no
/// control character, and one at least that is neither that nor a space.
pub fn pattern() -> String {
    let class = |ranges: &[(char, char)]| -> String {
        ranges.iter().map(|&(a, b)| format!("\\u{:04x}-\\u{:04x}", a as u32, b as u32)).collect()
    };
    let (control, blank) = (class(&CONTROLS), class(&CONTROLS) + &class(&SPACES));
    format!("^[^{control}]*[^{blank}][^{control}]*$")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_takes_what_the_check_takes() {
        let within = |ranges: &[(char, char)], c: char| ranges.iter().any(|&(a, b)| (a..=b).contains(&c));
        for c in '\0'..=char::MAX {
            assert_eq!(within(&CONTROLS, c), c.is_control(), "{c:?}");
            assert_eq!(within(&SPACES, c), c.is_whitespace() && !c.is_control(), "{c:?}");
        }
        let pattern = regex::Regex::new(&pattern()).unwrap();
        let lines =
            ["ann", "  ann ", "Zoë Ödegaard", "\u{3000}李\u{3000}", "a b", "", " ", "\u{2003}", "\tann", "an\u{85}n"];
        for sent in lines {
            assert_eq!(pattern.is_match(sent), check(sent, 32).is_ok(), "{sent:?}");
        }
        assert_eq!(check("  ann ", 32), Ok("ann"));
        assert_eq!(check(&"x".repeat(33), 32), Err(Fault::TooLong));
        assert_eq!(line("\tann", 32, "name").unwrap_err().param.as_deref(), Some("name"));
    }
}
