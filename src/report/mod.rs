//! The sale's report: what happened in a sale, read while it runs and after it ended
//! (`sale_report`, `GET /api/sale_report.csv`, the page at `/admin/report/<id>`).
//!
//! Where each figure comes from, durably:
//! - grants per second: the orders and dead letters (an order id carries the second of
//!   its grab), so the report agrees with the orders table by construction; and the
//!   grants the worker ended unsaved (the shopper held another order, the database
//!   had no unit), which no order or dead letter records: persisting records them as
//!   it decides so (`orders::store::unsaved_grant`, `unsaved_grants`);
//! - refusals per second and code, and the gate's latency: counted by each process as
//!   it answers ([`tally`]) and added to `sale_refusals` / `sale_latency` about once a
//!   second (and when the process stops);
//! - the first sell-out: the gate's clock, kept in the sale's Redis window and copied to
//!   the voucher's row by the live sampler;
//! - orders paid, cancelled, timed out; units added, withdrawn, returned: the database;
//! - operator actions: the operator's log.

pub mod api;
#[cfg(feature = "ssr")]
pub mod context;
#[cfg(feature = "ssr")]
pub mod sell_outs;
#[cfg(feature = "ssr")]
mod store;
#[cfg(feature = "ssr")]
pub mod tally;
pub mod view;

use crate::{audit::AuditEntry, voucher::Voucher};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The report page of a sale (the app's route `/admin/report/:id`).
pub fn page_path(voucher_id: i64) -> String {
    format!("/admin/report/{voucher_id}")
}

/// What a shopper's grab of a sale was answered: granted, or a refusal by its API error
/// code; `shed` is an `unavailable` from admission control (the process was past what
/// it serves), `unavailable` one from the gate not answering. The one list of a grab's
/// answers: the report's columns (in this order), the grab metric's labels
/// (`seckill_grabs_total{outcome}`) and the refusals the gate gives are these.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
    strum::VariantArray,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Outcome {
    Granted,
    SoldOut,
    AlreadyBought,
    NotStarted,
    Ended,
    SalePaused,
    InvalidToken,
    RateLimited,
    Shed,
    Unavailable,
}

impl Outcome {
    /// Every answer, in the report's order (the CSV's columns).
    pub const ALL: &[Self] = <Self as strum::VariantArray>::VARIANTS;

    /// The name in JSON, CSV, SQL and the metric's label.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The refusal a shopper answered `code` was (none for codes no grab of a sale
    /// answers: an unknown voucher, a bad request). A match, not a search: every refused
    /// grab asks. A test holds it to [`Self::code`] for every answer.
    pub fn of_code(code: crate::error::ErrorCode) -> Option<Self> {
        use crate::error::ErrorCode as C;
        Some(match code {
            C::SoldOut => Self::SoldOut,
            C::AlreadyBought => Self::AlreadyBought,
            C::NotStarted => Self::NotStarted,
            C::Ended => Self::Ended,
            C::SalePaused => Self::SalePaused,
            C::InvalidToken => Self::InvalidToken,
            C::RateLimited => Self::RateLimited,
            C::Unavailable => Self::Unavailable,
            _ => return None,
        })
    }

    /// The API error code a shopper sees for this answer (none for a grant; `shed` is
    /// an `unavailable`).
    pub fn code(self) -> Option<crate::error::ErrorCode> {
        use crate::error::ErrorCode as C;
        Some(match self {
            Self::Granted => return None,
            Self::SoldOut => C::SoldOut,
            Self::AlreadyBought => C::AlreadyBought,
            Self::NotStarted => C::NotStarted,
            Self::Ended => C::Ended,
            Self::SalePaused => C::SalePaused,
            Self::InvalidToken => C::InvalidToken,
            Self::RateLimited => C::RateLimited,
            Self::Shed | Self::Unavailable => C::Unavailable,
        })
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|o| o.as_str() == name)
    }

    /// How the report's page names it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Granted => "Granted",
            Self::SoldOut => "Sold out",
            Self::AlreadyBought => "Already bought",
            Self::NotStarted => "Not started",
            Self::Ended => "Ended",
            Self::SalePaused => "Paused",
            Self::InvalidToken => "Invalid token",
            Self::RateLimited => "Rate limited",
            Self::Shed => "Shed (busy)",
            Self::Unavailable => "Unavailable",
        }
    }
}

/// Upper bounds (µs) of the gate-latency bins: a grab is counted in the first
/// bin whose bound is at least its latency; the last takes the rest (a grab waits
/// at most `REDIS_DEADLINE`, 2 s, on the gate). Percentiles read as "at most".
#[cfg(feature = "ssr")]
pub const LATENCY_BOUNDS_US: [i64; 24] = [
    100, 200, 300, 500, 700, 1_000, 1_500, 2_000, 3_000, 5_000, 7_000, 10_000, 15_000, 20_000, 30_000, 50_000, 70_000,
    100_000, 200_000, 300_000, 500_000, 1_000_000, 2_000_000, 5_000_000,
];

/// A bin's upper bound in µs (the last for any index past it).
#[cfg(feature = "ssr")]
pub fn latency_bound(bin: usize) -> i64 {
    LATENCY_BOUNDS_US[bin.min(LATENCY_BOUNDS_US.len() - 1)]
}

/// The bin (its index in [`LATENCY_BOUNDS_US`]) of a latency in µs.
#[cfg(feature = "ssr")]
pub fn latency_bin(us: u64) -> usize {
    let us = i64::try_from(us).unwrap_or(i64::MAX);
    LATENCY_BOUNDS_US.iter().position(|&b| us <= b).unwrap_or(LATENCY_BOUNDS_US.len() - 1)
}

/// The answer to `sale_report`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Report {
    pub voucher: Voucher,
    /// When this report was read (figures of other processes may be up to a second
    /// behind it; this process's are up to date).
    #[serde(deserialize_with = "crate::rfc3339::deserialize")]
    pub generated_at: DateTime<Utc>,
    /// When the gate first sold the last unit, and how long after the start.
    #[serde(default, deserialize_with = "crate::rfc3339::deserialize_option")]
    #[schema(required = true)]
    pub sold_out_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub time_to_sell_out_ms: Option<i64>,
    /// Grabs by what they were answered, over the whole sale (every outcome named).
    pub answers: BTreeMap<Outcome, i64>,
    /// The same per second (Unix seconds), only seconds with a grab, oldest first; in a
    /// sale whose grabs span more than 3,600 seconds (`MOST_REPORT_ENTRIES`), per
    /// `step_secs` seconds (the CSV keeps every second).
    pub seconds: Vec<Second>,
    /// Seconds each entry of `seconds` sums, from its `at`: 1, or as many as keep the
    /// list within 3,600 entries (an entry's `at` is then the first grab's second plus
    /// a whole number of steps).
    pub step_secs: i64,
    pub latency: Latency,
    pub orders: OrderCounts,
    pub units: Units,
    /// The sale's operator actions, newest first: the newest 1,000 (`list_audit` with
    /// the sale's `voucher_id` pages through every one).
    pub actions: Vec<AuditEntry>,
}

/// Entries of a report's `seconds` at most: an hour of a sale second by second. A
/// sale of days answered every second would otherwise make a report of megabytes,
/// read again every few seconds by the report's page.
pub const MOST_REPORT_ENTRIES: i64 = 3_600;

impl Report {
    /// The report with `seconds` summed into steps of as many seconds as keep it within
    /// [`MOST_REPORT_ENTRIES`] entries (one second when they fit).
    pub fn in_steps(mut self) -> Self {
        let seconds = std::mem::take(&mut self.seconds);
        (self.seconds, self.step_secs) = in_steps(seconds, self.step_secs, MOST_REPORT_ENTRIES);
        self
    }
}

/// `entries` (oldest first, `step` seconds each) summed into steps of a whole number
/// of `step`s, as few as keep them within `most` entries over their span: the new
/// entries and their step. Each entry's `at` stays the first entry's plus whole steps.
/// What `sale_report` answers (`most`: [`MOST_REPORT_ENTRIES`]), and the chart's bars.
pub fn in_steps(entries: Vec<Second>, step: i64, most: i64) -> (Vec<Second>, i64) {
    let step = step.max(1);
    let (Some(first), Some(last)) = (entries.first(), entries.last()) else { return (entries, step) };
    let (start, span) = (first.at, last.at - first.at + step);
    let wider = ((span + most - 1) / most + step - 1) / step * step;
    if wider <= step {
        return (entries, step);
    }
    let mut steps: Vec<Second> = Vec::new();
    for entry in entries {
        let at = start + (entry.at - start) / wider * wider;
        match steps.last_mut() {
            Some(summed) if summed.at == at => {
                for (outcome, n) in entry.answers {
                    *summed.answers.entry(outcome).or_default() += n;
                }
            }
            _ => steps.push(Second { at, answers: entry.answers }),
        }
    }
    (steps, wider)
}

/// One second of the sale (or one step of `step_secs` seconds from `at`): its grabs by
/// outcome (outcomes with none left out).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Second {
    /// Unix seconds.
    pub at: i64,
    pub answers: BTreeMap<Outcome, i64>,
}

/// How long the gate took to decide the grabs it decided (from admission to answer).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Latency {
    pub grabs: i64,
    /// Percentiles, in ms: the upper bound of the bin holding them; `None` when no
    /// grab was measured.
    #[schema(required = true)]
    pub p50_ms: Option<f64>,
    #[schema(required = true)]
    pub p90_ms: Option<f64>,
    #[schema(required = true)]
    pub p99_ms: Option<f64>,
    #[schema(required = true)]
    pub p999_ms: Option<f64>,
    #[schema(required = true)]
    pub max_ms: Option<f64>,
    /// Grabs per latency bin, bins with none left out.
    pub bins: Vec<LatencyBin>,
}

/// One latency bin of a report: how many grabs the gate decided within `le_ms` (and
/// above the bin before).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LatencyBin {
    /// The bin's upper bound, in ms.
    pub le_ms: f64,
    pub grabs: i64,
}

impl Latency {
    #[cfg(feature = "ssr")]
    /// The figures from grabs per bin (index in [`LATENCY_BOUNDS_US`]).
    pub fn from_counts(counts: &[i64; LATENCY_BOUNDS_US.len()]) -> Self {
        let grabs: i64 = counts.iter().sum();
        let ms = |i: usize| LATENCY_BOUNDS_US[i] as f64 / 1000.0;
        // The bound of the bin holding the grab of rank ceil(q × grabs).
        let quantile = |q: f64| {
            let rank = ((grabs as f64 * q).ceil() as i64).max(1);
            let mut seen = 0;
            counts.iter().position(|&n| {
                seen += n;
                seen >= rank
            })
        };
        let at = |q: f64| if grabs == 0 { None } else { quantile(q).map(ms) };
        Self {
            grabs,
            p50_ms: at(0.5),
            p90_ms: at(0.9),
            p99_ms: at(0.99),
            p999_ms: at(0.999),
            max_ms: counts.iter().rposition(|&n| n > 0).map(ms),
            bins: counts
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(i, &grabs)| LatencyBin { le_ms: ms(i), grabs })
                .collect(),
        }
    }
}

/// The sale's orders by where they ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OrderCounts {
    /// Every order saved (each granted grab the worker persisted).
    pub total: i64,
    pub unpaid: i64,
    pub paid: i64,
    pub cancelled_by_shopper: i64,
    pub timed_out: i64,
}

/// Where the sale's units went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Units {
    /// Units put on sale: created, plus added, less withdrawn by operators.
    pub on_sale: i64,
    pub added: i64,
    pub withdrawn: i64,
    /// Held by an order not cancelled (unpaid or paid).
    pub sold: i64,
    /// Given back by cancelled orders (by the shopper or at the pay deadline).
    pub returned: i64,
    /// Grabbed again, at least: the grants beyond the units ever put on sale (created
    /// and added), each a unit given back (returned, dead-lettered or lost) and granted
    /// anew. Units are alike, so a unit given back and granted while unsold ones were
    /// withdrawn is not told apart from an unsold one: a lower bound (but for a grant
    /// the database had no unit for, after Redis was rebuilt with too many: rare, and
    /// counted here too).
    pub resold: i64,
    /// Still on sale.
    pub left: i64,
    /// Grants the worker gave up on (each unit given back).
    pub dead_letters: i64,
    /// Grants Redis lost before they were saved (a restart without its data, a
    /// failover), each unit back on sale; counted as their shoppers ask about them
    /// (`grab_result` answers `failed`, reason `lost`).
    pub lost: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_summed_into_steps_only_past_its_most_entries() {
        let second = |at: i64, n: i64| Second { at, answers: [(Outcome::SoldOut, n)].into() };
        let report = |seconds: Vec<Second>| Report {
            voucher: crate::voucher::Voucher::sample("t"),
            generated_at: DateTime::default(),
            sold_out_at: None,
            time_to_sell_out_ms: None,
            answers: BTreeMap::new(),
            seconds,
            step_secs: 1,
            latency: Latency::default(),
            orders: OrderCounts::default(),
            units: Units::default(),
            actions: Vec::new(),
        };
        let hour = report(vec![second(100, 1), second(100 + MOST_REPORT_ENTRIES - 1, 2)]);
        assert_eq!(hour.clone().in_steps(), hour, "an hour fits second by second");
        let longer = report(vec![second(100, 1), second(101, 2), second(102, 4), second(100 + MOST_REPORT_ENTRIES, 8)]);
        let stepped = longer.in_steps();
        assert_eq!(stepped.step_secs, 2);
        assert_eq!(stepped.seconds, [second(100, 3), second(102, 4), second(100 + MOST_REPORT_ENTRIES, 8)]);
        assert_eq!(report(Vec::new()).in_steps().step_secs, 1);
        // Steps summed again (the chart's bars) are whole numbers of them: 3 steps of 2
        // seconds, 6 seconds, into 2 entries at most: steps of 4, not 3.
        let (bars, per_bar) = in_steps(vec![second(10, 1), second(12, 2), second(14, 4)], 2, 2);
        assert_eq!((bars, per_bar), (vec![second(10, 3), second(14, 4)], 4));
    }

    #[test]
    fn outcomes_read_back_by_name() {
        for &o in Outcome::ALL {
            assert_eq!(Outcome::parse(o.as_str()), Some(o));
            assert_eq!(serde_json::to_value(o).unwrap(), o.as_str());
            // Every refusal is a code the API has, under the same name (`shed` is an
            // `unavailable` the process gave itself).
            if o != Outcome::Granted && o != Outcome::Shed {
                assert_eq!(o.code().map(|c| c.as_str()), Some(o.as_str()));
                assert_eq!(Outcome::of_code(o.code().unwrap()), Some(o));
            }
        }
        assert_eq!(Outcome::parse("lost"), None);
        // And no other code is a grab's answer.
        use strum::VariantArray;
        for &code in crate::error::ErrorCode::VARIANTS {
            let answers = Outcome::ALL.iter().any(|o| *o != Outcome::Shed && o.code() == Some(code));
            assert_eq!(Outcome::of_code(code).is_some(), answers, "{code:?}");
        }
    }

    #[cfg(feature = "ssr")]
    #[test]
    fn latencies_fall_in_the_first_bin_that_holds_them() {
        assert_eq!(latency_bin(0), 0);
        assert_eq!(latency_bin(100), 0);
        assert_eq!(latency_bin(101), 1);
        assert_eq!(latency_bin(2_000_000), 22);
        assert_eq!(latency_bin(60_000_000), 23, "the last bin takes the rest");
    }

    #[cfg(feature = "ssr")]
    #[test]
    fn percentiles_are_the_bounds_of_the_bins_holding_them() {
        let mut counts = [0; LATENCY_BOUNDS_US.len()];
        assert_eq!(Latency::from_counts(&counts), Latency::default(), "none measured");
        counts[latency_bin(400)] = 90; // ≤ 0.5 ms
        counts[latency_bin(4_000)] = 9; // ≤ 5 ms
        counts[latency_bin(40_000)] = 1; // ≤ 50 ms
        let l = Latency::from_counts(&counts);
        assert_eq!(l.grabs, 100);
        assert_eq!((l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms), (Some(0.5), Some(0.5), Some(5.0), Some(50.0)));
        assert_eq!(l.max_ms, Some(50.0));
        let bins: Vec<_> = l.bins.iter().map(|b| (b.le_ms, b.grabs)).collect();
        assert_eq!(bins, vec![(0.5, 90), (5.0, 9), (50.0, 1)]);
    }
}
