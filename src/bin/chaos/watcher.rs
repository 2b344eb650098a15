//! The operator watching: one live feed (`GET /api/live`, the admin token) open on
//! each app process all day, every snapshot's arrival recorded. The promise it
//! checks (`checker::feed_keeps_coming`): a process that runs shows its dashboard
//! numbers a few times a second whatever else is down, saying which are not fresh.

use crate::history::History;
use futures::StreamExt;
use std::{sync::Arc, time::Duration};

/// A feed silent this long is taken for dead and opened again (the server speaks
/// every 15 s at least).
const SILENT_FOR: Duration = Duration::from_secs(20);
/// The pause before opening a feed again.
const AGAIN_AFTER: Duration = Duration::from_millis(250);

/// Keeps a feed open on `base` (app process `process`) until `until` (ms since the
/// start), recording each snapshot's arrival.
pub async fn watch(history: Arc<History>, process: usize, base: String, admin_token: String, until: u64) {
    let http = reqwest::Client::new();
    while history.now() < until {
        let opened = http.get(format!("{base}/api/live")).bearer_auth(&admin_token).send();
        if let Ok(Ok(res)) = tokio::time::timeout(SILENT_FOR, opened).await {
            if res.status().is_success() {
                read(&history, process, res, until).await;
            }
        }
        tokio::time::sleep(AGAIN_AFTER).await;
    }
}

/// Reads one open feed until it ends, falls silent or the day is over.
async fn read(history: &History, process: usize, res: reqwest::Response, until: u64) {
    let mut body = res.bytes_stream();
    let mut buffer = String::new();
    while history.now() < until {
        let Ok(Some(Ok(chunk))) = tokio::time::timeout(SILENT_FOR, body.next()).await else { return };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            if is_snapshot(&frame) {
                history.snapshot(process);
            }
        }
    }
}

/// Whether an event-stream frame carries a snapshot.
fn is_snapshot(frame: &str) -> bool {
    let data: Vec<&str> = frame.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
    serde_json::from_str::<serde_json::Value>(&data.join("\n")).is_ok_and(|f| f["type"] == "snapshot")
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_snapshot_frame_counts() {
        assert!(super::is_snapshot("event: message\ndata: {\"type\":\"snapshot\",\"at_ms\":1}\n\n"));
        assert!(!super::is_snapshot("data: {\"type\":\"event\"}\n\n"));
        assert!(!super::is_snapshot(": keep-alive\n\n"));
    }
}
