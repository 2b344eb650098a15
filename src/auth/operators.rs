//! Operators in SQL: named accounts with a role, apart from shoppers. Made by
//! `seckill operator add NAME` or by an admin (`add_operator`).

use super::Role;
use crate::backend::Db;

/// What signing in as an operator needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorRow {
    pub id: i64,
    pub name: String,
    pub password_hash: String,
    pub role: Role,
}

/// A new operator; `None` when the name is taken.
pub async fn create(db: &Db, name: &str, password_hash: &str, role: Role) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar(
        "INSERT INTO operators (name, password_hash, role, created_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (name) DO NOTHING RETURNING id",
    )
    .bind(name)
    .bind(password_hash)
    .bind(role.as_str())
    .bind(chrono::Utc::now().timestamp_millis())
    .fetch_optional(db)
    .await
}

/// The operator with this name (an unknown role reads as none: it cannot sign in).
pub async fn by_name(db: &Db, name: &str) -> sqlx::Result<Option<OperatorRow>> {
    let row: Option<(i64, String, String, String)> =
        sqlx::query_as("SELECT id, name, password_hash, role FROM operators WHERE name = $1")
            .bind(name)
            .fetch_optional(db)
            .await?;
    Ok(row.and_then(|(id, name, password_hash, role)| {
        Some(OperatorRow { id, name, password_hash, role: Role::from_name(&role)? })
    }))
}
