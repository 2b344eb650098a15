//! Lists that page: newest first, `limit` at a time, each page's `next` the `after`
//! of the one behind it (keyset paging, as the CSV export pages: each page one indexed
//! query however far in, and a row written meanwhile neither skipped nor shown twice).

use crate::wire::{self, FromJson};
use serde::{Deserialize, Serialize};

/// One page of a list, newest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Whether older items follow: ask again with `after` set to `next`.
    pub has_more: bool,
    /// The cursor of the next page (the last item's id), when `has_more`.
    pub next: Option<String>,
}

impl<T: FromJson> FromJson for Page<T> {
    fn from_json(json: &impl wire::Json) -> Option<Self> {
        Some(Self {
            items: Vec::from_json(&json.field("items")?)?,
            has_more: json.flag_at("has_more")?,
            next: json.maybe("next", wire::Json::text)?,
        })
    }
}

/// How many items a list's page holds: `default` when the caller sends no `limit`, at
/// most `most`. Declared once per list: the server checks `limit` by it and the API
/// document states it (`server::openapi::limits`).
#[cfg(feature = "ssr")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageSize {
    pub default: i64,
    pub most: i64,
}

/// Most digits a page's cursor (`after`) may have: an id is a positive `i64`.
#[cfg(feature = "ssr")]
pub const CURSOR_DIGITS: usize = 19;

/// The form of a page's cursor a caller sends (in the API document, from
/// [`CURSOR_DIGITS`]).
#[cfg(feature = "ssr")]
pub fn cursor_pattern() -> String {
    format!("^[0-9]{{1,{CURSOR_DIGITS}}}$")
}

#[cfg(feature = "ssr")]
pub use server::Paging;

#[cfg(feature = "ssr")]
mod server {
    use super::{Page, PageSize, CURSOR_DIGITS};
    use crate::error::{AppError, AppResult};

    /// A page asked for, checked: at most `limit` items, older than `before` (an id).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Paging {
        pub limit: i64,
        pub before: Option<i64>,
    }

    impl Paging {
        /// `limit` (1 to `size.most`, `size.default` when absent) and `after` (a `next`
        /// a page answered: a decimal id) as a caller sent them.
        pub fn asked(limit: Option<i64>, after: Option<&str>, size: PageSize) -> AppResult<Self> {
            let PageSize { default, most } = size;
            let limit = limit.unwrap_or(default);
            if !(1..=most).contains(&limit) {
                return Err(AppError::invalid(format!("limit must be between 1 and {most}.")).on("limit"));
            }
            let before = match after {
                None => None,
                Some(after) => Some(Self::id(after).ok_or_else(|| {
                    AppError::invalid("after must be the `next` of a page: a positive decimal id.").on("after")
                })?),
            };
            Ok(Self { limit, before })
        }

        /// An id as a page's `next` writes it: 1 to [`CURSOR_DIGITS`] digits, above 0
        /// (`-5` and ` 8` were taken once, while a number was refused; and any number of
        /// leading zeros, while the API document said at most 19 digits).
        fn id(sent: &str) -> Option<i64> {
            let digits = (1..=CURSOR_DIGITS).contains(&sent.len()) && sent.bytes().all(|b| b.is_ascii_digit());
            digits.then(|| sent.parse().ok()).flatten().filter(|&id| id > 0)
        }

        /// Rows to read: one past the page, to tell whether more follow.
        pub fn rows(self) -> i64 {
            self.limit + 1
        }

        /// The page of `rows` (read newest first, [`Self::rows`] of them), each item's
        /// id by `id`.
        pub fn page<T>(self, mut rows: Vec<T>, id: impl Fn(&T) -> i64) -> Page<T> {
            let has_more = rows.len() as i64 > self.limit;
            rows.truncate(self.limit as usize);
            let next = if has_more { rows.last().map(|r| id(r).to_string()) } else { None };
            Page { items: rows, has_more, next }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        const SIZE: PageSize = PageSize { default: 10, most: 100 };

        #[test]
        fn a_page_says_whether_more_follow_and_where() {
            let paging = Paging::asked(Some(2), None, SIZE).unwrap();
            assert_eq!(paging.rows(), 3);
            let page = paging.page(vec![9, 8, 7], |id| *id);
            assert_eq!(page, Page { items: vec![9, 8], has_more: true, next: Some("8".into()) });
            let last = Paging::asked(Some(2), page.next.as_deref(), SIZE).unwrap();
            assert_eq!(last.before, Some(8));
            assert_eq!(last.page(vec![7], |id| *id), Page { items: vec![7], has_more: false, next: None });
            assert_eq!(Paging::asked(None, None, SIZE).unwrap().limit, 10);
            assert_eq!(Paging::asked(None, Some("0000000000000000008"), SIZE).unwrap().before, Some(8));
            assert!(Paging::asked(Some(0), None, SIZE).is_err());
            assert!(Paging::asked(Some(101), None, SIZE).is_err());
            let zeros = format!("{}8", "0".repeat(CURSOR_DIGITS));
            for wrong in ["8x", "-5", "0", " 8", "+8", "", "99999999999999999999", &zeros] {
                assert!(Paging::asked(None, Some(wrong), SIZE).is_err(), "{wrong:?}");
            }
        }
    }
}
