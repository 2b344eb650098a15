//! `/api/list_audit`: the operator's log, newest first.

use super::AuditEntry;
use crate::error::AppResult;
use leptos::prelude::*;
use server_fn::codec::Json;

#[cfg(feature = "ssr")]
use {super::store, crate::auth::session::require_operator, crate::state::AppState};

/// Entries `list_audit` answers at most.
#[cfg(feature = "ssr")]
const LIMIT: i64 = 200;

/// The newest 200 entries of the operator's log, of one voucher or of all (operators).
#[server(prefix = "/api", endpoint = "list_audit", input = Json)]
pub async fn list_audit(voucher_id: Option<i64>) -> AppResult<Vec<AuditEntry>> {
    let state = expect_context::<AppState>();
    require_operator(&state.secrets)?;
    Ok(store::list(&state.backend.db, voucher_id, LIMIT).await?)
}
