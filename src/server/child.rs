//! Child processes that do not outlive the process that started them.

use tokio::process::Command;

/// Has the child get `signal` when the process that started it dies, by any means
/// (SIGKILL and abort included, which run no clean-up of ours). A private
/// redis-server left behind by a crashed app would still hold its port and its
/// append-only file when the app starts again, and a test server left behind by an
/// aborted test run would hold the run's output open. The kernel sends it when the
/// starting thread ends; that is the main thread (the first serving runtime), which
/// lives as long as the app.
pub fn ends_with_parent(command: &mut Command, signal: i32) -> &mut Command {
    #[cfg(target_os = "linux")]
    // SAFETY: the closure runs between fork and exec, where only async-signal-safe
    // calls are allowed; prctl is one, and nothing is allocated.
    unsafe {
        command.pre_exec(move || match libc::prctl(libc::PR_SET_PDEATHSIG, signal) {
            -1 => Err(std::io::Error::last_os_error()),
            _ => Ok(()),
        });
    }
    #[cfg(not(target_os = "linux"))]
    let _ = signal;
    command
}
