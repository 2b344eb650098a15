//! The gate's clock, as the shopper's page keeps it: the device's clock may be
//! minutes off, and a countdown or a Grab button that trusted it would open early or
//! late. The page starts from the gate's time the server rendered it at, asks
//! `server_time` once it runs (and every minute), and keeps "now" as the latest reading
//! plus the time its own monotonic clock counted since it arrived. The gate read its
//! clock before that moment, so the page's "now" is never ahead of the gate's (the
//! button never opens early); it is behind by the page's age until the first answer
//! (the shared page is at most two cache lifetimes old: `server::page_cache`), then by
//! at most the round trip. It ticks ten times a second, so the button opens within a
//! round trip and a tenth of a second of the instant the gate does.

use super::{api::ServerTime, GateTime};
use crate::{
    browser::{every, monotonic_ms, pause},
    error::AppResult,
    wire,
};
use chrono::{DateTime, Utc};
use leptos::{prelude::*, server_fn::ServerFn};

/// How often the page's "now" ticks (ms).
const TICK_MS: u64 = 100;
/// How often the offset is measured again (ms).
const MEASURE_EVERY_MS: u64 = 60_000;
/// Tries of a first measurement that fails, a quarter second apart and doubling.
const FIRST_TRIES: u32 = 6;

/// `server_time`, asked by the browser (`wire`).
async fn gate_time() -> AppResult<GateTime> {
    wire::call(ServerTime::PATH, wire::Args::new()).await
}

/// The gate's time as the page knows it.
#[derive(Clone, Copy)]
pub struct ServerClock {
    /// The gate's time now: the latest reading of it (the render's, or measured) plus
    /// what the device's monotonic clock counted since.
    pub now: RwSignal<DateTime<Utc>>,
    /// Whether the page has the gate's time (the render's, or measured): until then
    /// "now" is the device's clock, and nothing that depends on the instant (the Grab
    /// button) may trust it.
    pub known: RwSignal<bool>,
}

/// The page's clock: ticks in the browser (on the server, the time the page is rendered
/// at, once). "Now" is the gate's time at the last measurement plus the time the
/// device's monotonic clock counted since (`browser::monotonic_ms`), so a device clock
/// set while the page is open moves nothing. `rendered_ms` is the gate's time the
/// server rendered the page at, when it had it: the first measurement, so the page
/// starts from it (it was taken before the page arrived: never ahead) and the server's
/// render and the hydrated island agree on which Grab buttons are open.
pub fn use_server_clock(rendered_ms: Option<i64>) -> ServerClock {
    // The gate's time (ms) and the monotonic clock's reading when it was measured.
    let arrived = super::early::arrived_at().unwrap_or_else(monotonic_ms);
    let base = StoredValue::new(rendered_ms.map(|ms| (ms, arrived)));
    let start = rendered_ms.and_then(DateTime::from_timestamp_millis);
    let clock =
        ServerClock { now: RwSignal::new(start.unwrap_or_else(Utc::now)), known: RwSignal::new(start.is_some()) };
    let gate_now = move || {
        let (gate_ms, at) = base.try_get_value().flatten()?;
        DateTime::from_timestamp_millis(gate_ms + (monotonic_ms() - at) as i64)
    };
    // Whether `server_time` has answered yet: the render's time is a start, not a reason
    // to stop asking soon.
    let measured = StoredValue::new(false);
    let measure = move || {
        leptos::task::spawn_local(async move {
            // Asked again soon while it fails (a busy start): until it answers, the page
            // counts from the render's time (up to the page cache's age behind), or Grab waits.
            let mut answer = gate_time().await;
            for attempt in 0..FIRST_TRIES {
                if answer.is_ok() || measured.try_get_value() != Some(false) {
                    break;
                }
                pause(250 << attempt).await;
                answer = gate_time().await;
            }
            let Ok(answer) = answer else { return };
            measured.try_set_value(true);
            let fresh = (answer.now_ms, monotonic_ms());
            // Every reading is behind the gate (each was taken before it arrived), so of
            // two the later is the closer: a slow answer does not move "now" back (nor
            // close a button it opened). A reading older than a measuring period gives
            // way anyway, so the device's clock rate never adds up over hours.
            let keep = base.try_get_value().flatten().is_some_and(|(gate_ms, at)| {
                let age = fresh.1 - at;
                age < MEASURE_EVERY_MS as f64 && gate_ms + age as i64 > fresh.0
            });
            if !keep {
                base.try_set_value(Some(fresh));
            }
            // "now" moves to the gate's time before anything trusts it.
            if let Some(now) = gate_now() {
                clock.now.try_set(now);
            }
            clock.known.try_set(true);
        })
    };
    Effect::new(move |_| measure());
    every(MEASURE_EVERY_MS, measure);
    every(TICK_MS, move || {
        clock.now.try_set(gate_now().unwrap_or_else(Utc::now));
    });
    clock
}
