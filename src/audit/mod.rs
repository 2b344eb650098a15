//! The operator's log: every operator action (create, warm, operator accounts; the
//! sale's live changes as they come) with who did it, what, the state before and
//! after, and when. Written in the action's own request, after the action; read by
//! `list_audit` and the admin page (`sale::run`, `sale::operator_view`), and a sale's
//! report. Imports no domain: actions hand it their actor's name and their states as
//! JSON.

#[cfg(feature = "ssr")]
pub mod store;
pub mod view;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One recorded action.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AuditEntry {
    /// The entry's place in the log (a page's cursor).
    pub id: i64,
    #[serde(deserialize_with = "crate::rfc3339::deserialize")]
    pub at: DateTime<Utc>,
    /// An operator's name, or `token` (the admin token).
    pub actor: String,
    /// What was done: `create_voucher`, `warm_up`, `add_operator`, …
    pub action: String,
    #[schema(required = true)]
    pub voucher_id: Option<i64>,
    /// The state before and after, as JSON text (`null` when there was none).
    #[schema(required = true)]
    pub before: Option<String>,
    #[schema(required = true)]
    pub after: Option<String>,
}
