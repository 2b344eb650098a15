//! What the servers under test log (warnings and worse): shown in a failing test's
//! output, as `with_test_writer` shows it, and kept (the newest [`KEPT`] lines) for the
//! tests that check what an outage logs. The tests of this binary run side by side
//! and share it: a test counts only lines that name something its own (a key in its
//! namespace).

use std::{
    collections::VecDeque,
    io::Write,
    sync::{Mutex, PoisonError},
};
use tracing_subscriber::fmt::MakeWriter;

/// The lines kept, at most.
const KEPT: usize = 20_000;

static LINES: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());

/// Logs warnings and worse from here on, once per test binary.
pub fn capture() {
    let _ = tracing_subscriber::fmt().with_writer(Tee).with_ansi(false).with_env_filter("warn").try_init();
}

/// The lines kept that contain every one of `needles`.
pub fn lines_with(needles: &[&str]) -> Vec<String> {
    let lines = LINES.lock().unwrap_or_else(PoisonError::into_inner);
    lines.iter().filter(|line| needles.iter().all(|n| line.contains(n))).cloned().collect()
}

/// Writes each line where the test harness shows it, and keeps it.
struct Tee;

impl<'a> MakeWriter<'a> for Tee {
    type Writer = Tee;

    fn make_writer(&'a self) -> Self::Writer {
        Tee
    }
}

impl Write for Tee {
    /// The formatter writes each event in one call.
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let line = String::from_utf8_lossy(buf);
        // `print!`, as the harness's own writer does: captured for the test's output.
        print!("{line}");
        let mut lines = LINES.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == KEPT {
            lines.pop_front();
        }
        lines.push_back(line.into_owned());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stdout().flush()
    }
}
