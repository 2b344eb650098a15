//! How the operator's log reads on a page (a sale's log, a sale's report).

use super::AuditEntry;
use crate::browser::local_time;
use leptos::prelude::*;

/// One entry as a line: when (the operator's zone), what, who, and the state it left.
pub fn log_line(e: AuditEntry) -> impl IntoView {
    let change = e.after.or(e.before).unwrap_or_default();
    let when = local_time(e.at);
    view! { <li>{format!("{when} {} by {}: {change}", e.action, e.actor)}</li> }
}
