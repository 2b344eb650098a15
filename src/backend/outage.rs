//! How a background task logs a store it cannot reach: the first failure of a run at
//! once, then at most every [`SAY_AGAIN_AFTER`] while it lasts, and its end. A store
//! down for minutes is then a line a task every half minute, not one a second.

use std::{
    fmt::Display,
    time::{Duration, Instant},
};

/// While failures go on, they are said again at most this often.
pub const SAY_AGAIN_AFTER: Duration = Duration::from_secs(30);

/// One task's run of failures, if one is under way: since when, and when last said.
#[derive(Debug, Default)]
pub struct Outage(Option<(Instant, Instant)>);

impl Outage {
    /// A failure: logged (as `what: error`) when it starts a run, or when the run was
    /// last said [`SAY_AGAIN_AFTER`] ago.
    pub fn failed(&mut self, what: &dyn Display, error: &dyn Display) {
        let now = Instant::now();
        match &mut self.0 {
            None => {
                tracing::warn!("{what}: {error}");
                self.0 = Some((now, now));
            }
            Some((since, said)) if now.duration_since(*said) >= SAY_AGAIN_AFTER => {
                tracing::warn!("{what}: {error} (failing for {:?})", now.duration_since(*since));
                *said = now;
            }
            Some(_) => {}
        }
    }

    /// A success: ends the run, if one was under way, and says how long it lasted.
    pub fn ended(&mut self, what: &dyn Display) {
        if let Some((since, _)) = self.0.take() {
            tracing::info!("{what}: working again after {:?}", since.elapsed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_failures_starts_and_ends() {
        let mut outage = Outage::default();
        assert!(outage.0.is_none());
        outage.failed(&"worker", &"refused");
        outage.failed(&"worker", &"refused");
        assert!(outage.0.is_some());
        outage.ended(&"worker");
        assert!(outage.0.is_none());
    }
}
