//! The gate's clock, as the shopper's page keeps it: the device's clock may be
//! minutes off, and a countdown or a Grab button that trusted it would open early or
//! late. The page starts from the gate's time the server rendered it at, asks
//! `server_time` once it runs (and every minute), and keeps "now" as the latest answer
//! plus the time its own monotonic clock counted since it arrived. The
//! gate read its clock before that moment, so the page's "now" is never ahead of the gate's
//! (the button never opens early) and behind it by at most the round trip; it ticks
//! ten times a second, so the button opens within a round trip and a tenth of a second
//! of the instant the gate does.

use super::api::server_time;
use crate::browser::{every, monotonic_ms, pause};
use chrono::{DateTime, Utc};
use leptos::prelude::*;

/// How often the page's "now" ticks (ms).
const TICK_MS: u64 = 100;
/// How often the offset is measured again (ms).
const MEASURE_EVERY_MS: u64 = 60_000;
/// Tries of a first measurement that fails, a quarter second apart and doubling.
const FIRST_TRIES: u32 = 6;

/// The gate's time as the page knows it.
#[derive(Clone, Copy)]
pub struct ServerClock {
    /// The gate's time now, by the device's clock and the measured offset.
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
    let measure = move || {
        leptos::task::spawn_local(async move {
            // Asked again soon while it fails (a busy start): until it answers, Grab waits.
            let mut answer = server_time(None).await;
            for attempt in 0..FIRST_TRIES {
                if answer.is_ok() || base.try_with_value(Option::is_some) != Some(false) {
                    break;
                }
                pause(250 << attempt).await;
                answer = server_time(None).await;
            }
            let Ok(answer) = answer else { return };
            base.try_set_value(Some((answer.now_ms, monotonic_ms())));
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
