//! A background step run one at a time beside a loop that must not wait for it (the
//! live sampler's writes and checks): a store slow to answer piles up no tasks and
//! holds up no round, and a step is never cut short.

use std::future::Future;
use tokio::task::JoinHandle;

/// The step under way, if any.
#[derive(Default)]
pub struct LoneTask(Option<JoinHandle<()>>);

impl LoneTask {
    /// Starts `step` unless the last one is still under way; then `step` is dropped
    /// unstarted (the loop hands its work again next round).
    pub fn start(&mut self, step: impl Future<Output = ()> + Send + 'static) {
        if self.0.as_ref().is_none_or(JoinHandle::is_finished) {
            self.0 = Some(tokio::spawn(step));
        }
    }
}
