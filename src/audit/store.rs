//! The operator's log in SQL.

use super::AuditEntry;
use crate::backend::Db;
use chrono::TimeZone;

/// What one action records.
pub struct Record<'a> {
    pub actor: &'a str,
    pub action: &'a str,
    pub voucher_id: Option<i64>,
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
}

/// Appends one entry. A failure is logged, not returned: the action it records is done.
pub async fn record(db: &Db, r: Record<'_>) {
    let text = |v: Option<serde_json::Value>| v.map(|v| v.to_string());
    let written = sqlx::query(
        "INSERT INTO audit_log (at, actor, action, voucher_id, before, after) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(chrono::Utc::now().timestamp_millis())
    .bind(r.actor)
    .bind(r.action)
    .bind(r.voucher_id)
    .bind(text(r.before))
    .bind(text(r.after))
    .execute(db)
    .await;
    if let Err(e) = written {
        tracing::error!(actor = r.actor, action = r.action, "operator's log: {e}");
    }
}

/// The newest `limit` entries, of one voucher or of all.
pub async fn list(db: &Db, voucher_id: Option<i64>, before: Option<i64>, limit: i64) -> sqlx::Result<Vec<AuditEntry>> {
    type Row = (i64, i64, String, String, Option<i64>, Option<String>, Option<String>);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, at, actor, action, voucher_id, before, after FROM audit_log \
         WHERE ($1 IS NULL OR voucher_id = $1) AND ($2 IS NULL OR id < $2) ORDER BY id DESC LIMIT $3",
    )
    .bind(voucher_id)
    .bind(before)
    .bind(limit)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, at, actor, action, voucher_id, before, after)| AuditEntry {
            id,
            at: chrono::Utc.timestamp_millis_opt(at).single().unwrap_or_default(),
            actor,
            action,
            voucher_id,
            before,
            after,
        })
        .collect())
}
