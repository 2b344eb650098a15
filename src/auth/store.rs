//! Users in SQL.

use crate::backend::Db;

/// The id of the user with this name, creating the user when new. A name that exists
/// is only read: signing in again writes nothing.
pub async fn user_by_name(db: &Db, name: &str) -> sqlx::Result<i64> {
    if let Some(id) = find(db, name).await? {
        return Ok(id);
    }
    let now = chrono::Utc::now().timestamp_millis();
    // Two first sign-ins with one name may race: the loser's insert does nothing.
    sqlx::query("INSERT INTO users (name, created_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING")
        .bind(name)
        .bind(now)
        .execute(db)
        .await?;
    find(db, name).await?.ok_or(sqlx::Error::RowNotFound)
}

async fn find(db: &Db, name: &str) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar("SELECT id FROM users WHERE name = $1").bind(name).fetch_optional(db).await
}

/// The name of a user, if the user exists.
pub async fn name_of(db: &Db, user_id: i64) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar("SELECT name FROM users WHERE id = $1").bind(user_id).fetch_optional(db).await
}
