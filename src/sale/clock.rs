//! The gate's clock, as the shopper's page keeps it: the device's clock may be
//! minutes off, and a countdown or a Grab button that trusted it would open early or
//! late. The page starts from the gate's time the server rendered it at (plus the
//! shared render's age when it was sent, `server::page_cache`), asks
//! `server_time` once it runs (and every minute), and keeps "now" as the latest reading
//! plus the time its own monotonic clock counted since it arrived. The gate read its
//! clock before that moment, so the page's "now" is never ahead of the gate's (the
//! button never opens early); it is behind by the page's way from the server until
//! the first answer, then by at most the round trip. The shop reads it ten times a second ([`TICK_MS`]), so the
//! button opens within a round trip and a tenth of a second of the instant the gate
//! does. In the browser only: the server renders with the gate's time it read.

use super::{api::ServerTime, GateTime};
use crate::{
    browser::{every, monotonic_ms, pause},
    error::AppResult,
    wire,
};
use chrono::{DateTime, Utc};
use leptos::server_fn::ServerFn;
use std::{cell::Cell, rc::Rc};

/// How often the page's "now" ticks (ms): the shop repaints its cards this often.
pub const TICK_MS: u64 = 100;
/// How often the offset is measured again (ms).
const MEASURE_EVERY_MS: u64 = 60_000;
/// Tries of a first measurement that fails, a quarter second apart and doubling.
const FIRST_TRIES: u32 = 6;

/// `server_time`, asked by the browser (`wire`).
async fn gate_time() -> AppResult<GateTime> {
    wire::call(ServerTime::PATH, wire::Args::new()).await
}

/// The gate's time as the page knows it: the latest reading of it (the render's, or
/// measured) and the device's monotonic clock when it was had.
pub struct GateClock {
    base: Cell<Option<(i64, f64)>>,
    /// Whether `server_time` has answered yet: the render's time is a start, not a
    /// reason to stop asking soon.
    measured: Cell<bool>,
}

impl GateClock {
    /// The page's clock, measured again every minute. "Now" is the gate's time at the
    /// last measurement plus the time the device's monotonic clock counted since
    /// (`browser::monotonic_ms`), so a device clock set while the page is open moves
    /// nothing. `rendered_ms` is the gate's time the server rendered the page at, when
    /// it had it: the first measurement, so the page starts from it (it was taken
    /// before the page arrived: never ahead) and the server's render and the island
    /// agree on which Grab buttons are open.
    pub fn start(rendered_ms: Option<i64>) -> Rc<Self> {
        let arrived = super::early::arrived_at().unwrap_or_else(monotonic_ms);
        let sent = super::early::gate_when_sent().or(rendered_ms);
        let clock = Rc::new(Self { base: Cell::new(sent.map(|ms| (ms, arrived))), measured: Cell::new(false) });
        let measure = {
            let clock = clock.clone();
            move || leptos::task::spawn_local(clock.clone().measure())
        };
        measure();
        every(MEASURE_EVERY_MS, measure);
        clock
    }

    /// The gate's time now; `None` until the page has it (the render's or measured):
    /// nothing that depends on the instant (the Grab button) may trust the device's.
    pub fn now(&self) -> Option<DateTime<Utc>> {
        let (gate_ms, at) = self.base.get()?;
        DateTime::from_timestamp_millis(gate_ms + (monotonic_ms() - at) as i64)
    }

    async fn measure(self: Rc<Self>) {
        // Asked again soon while it fails (a busy start): until it answers, the page
        // counts from the render's time (up to the page cache's age behind), or Grab waits.
        let mut answer = gate_time().await;
        for attempt in 0..FIRST_TRIES {
            if answer.is_ok() || self.measured.get() {
                break;
            }
            pause(250 << attempt).await;
            answer = gate_time().await;
        }
        let Ok(answer) = answer else { return };
        self.measured.set(true);
        let fresh = (answer.now_ms, monotonic_ms());
        // Every reading is behind the gate (each was taken before it arrived), so of
        // two the later is the closer: a slow answer does not move "now" back (nor
        // close a button it opened). A reading older than a measuring period gives
        // way anyway, so the device's clock rate never adds up over hours.
        let keep = self.base.get().is_some_and(|(gate_ms, at)| {
            let age = fresh.1 - at;
            age < MEASURE_EVERY_MS as f64 && gate_ms + age as i64 > fresh.0
        });
        if !keep {
            self.base.set(Some(fresh));
        }
    }
}
