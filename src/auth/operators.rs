//! Operators in SQL: named accounts with a role, apart from shoppers. Made by
//! `seckill operator add NAME` or by an admin (`add_operator`); removed, demoted and
//! signed out for good the same two ways.
//!
//! An operator cookie names its operator and the operator's `generation`, nothing else:
//! who they are and what they may do is read from [`Directory`], this process's copy
//! of the table, which every process reads again every [`REVOCATIONS_READ_EVERY`](super::REVOCATIONS_READ_EVERY) (one query of
//! a table of a few rows, whatever the traffic). So a removed operator's cookie, a
//! demoted admin's, or one signed out (the generation raised) stops working on the
//! process that made the change at once and on every other within that plus
//! one query: under a second. The admin token's cookies are followed the same way
//! (entry [`TOKEN_ID`], from the `admin_token` row): signing out with one ends them all.

use super::{
    names::{self, Keys, NewName},
    ListedOperator as Listed, Role, REVOCATIONS_READ_EVERY,
};
use crate::{
    backend::Db,
    error::{AppError, ErrorCode},
    shutdown::Shutdown,
};
use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, RwLock,
    },
    time::Duration,
};

/// Names an operator may not take: the log records the admin token's actions as
/// `token` and the command line's as `command line`.
pub const RESERVED_NAMES: [&str; 2] = ["token", "command line"];

/// What signing in as an operator needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorRow {
    pub id: i64,
    pub name: String,
    pub password_hash: String,
    pub role: Role,
    pub generation: i64,
}

/// Refuses a name the log keeps for the admin token or the command line, or one that
/// passes for it.
pub fn check_not_reserved(name: &NewName) -> Result<(), AppError> {
    if RESERVED_NAMES.iter().any(|r| Keys::of(r).meet(&name.keys)) {
        let message = format!("The name {:?} is reserved; please choose another.", name.name);
        return Err(AppError::invalid(message).on("name"));
    }
    Ok(())
}

/// A new operator; `None` when the name, or one that passes for it, is taken.
pub async fn create(db: &Db, name: &NewName, password_hash: &str, role: Role) -> sqlx::Result<Option<i64>> {
    let insert = || {
        let query = sqlx::query_scalar(
            "INSERT INTO operators (name, name_key, name_shape, password_hash, role, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING id",
        )
        .bind(&name.name)
        .bind(&name.keys.case)
        .bind(&name.keys.shape)
        .bind(password_hash)
        .bind(role.as_str())
        .bind(chrono::Utc::now().timestamp_millis());
        crate::backend::written(query.fetch_all(db))
    };
    names::inserted(db, "operators", name, insert).await
}

/// The operator with this name (an unknown role reads as none: it cannot sign in).
pub async fn by_name(db: &Db, name: &str) -> sqlx::Result<Option<OperatorRow>> {
    let row: Option<(i64, String, String, String, i64)> =
        sqlx::query_as("SELECT id, name, password_hash, role, generation FROM operators WHERE name = $1")
            .bind(name)
            .fetch_optional(db)
            .await?;
    Ok(row.and_then(|(id, name, password_hash, role, generation)| {
        Some(OperatorRow { id, name, password_hash, role: Role::from_name(&role)?, generation })
    }))
}

/// Every operator, by name.
pub async fn list(db: &Db) -> sqlx::Result<Vec<Listed>> {
    let rows: Vec<(String, String, Option<i64>)> =
        sqlx::query_as("SELECT name, role, last_sign_in_at FROM operators ORDER BY name").fetch_all(db).await?;
    Ok(rows
        .into_iter()
        .filter_map(|(name, role, last_sign_in_at)| {
            Some(Listed { name, role: Role::from_name(&role)?, last_sign_in_at })
        })
        .collect())
}

/// Notes a sign-in, for the list.
pub async fn signed_in(db: &Db, id: i64) -> sqlx::Result<()> {
    sqlx::query("UPDATE operators SET last_sign_in_at = $1 WHERE id = $2")
        .bind(chrono::Utc::now().timestamp_millis())
        .bind(id)
        .execute(db)
        .await
        .map(drop)
}

/// Ends every operator cookie of operator `id` (signing out; a new password, when
/// given, replaces the old). The new generation, which a cookie made now carries;
/// `None` when the operator is gone (removed meanwhile: every cookie of theirs ended).
pub async fn end_sessions(db: &Db, id: i64, new_password_hash: Option<&str>) -> sqlx::Result<Option<i64>> {
    let query = sqlx::query_scalar(
        "UPDATE operators SET generation = generation + 1, password_hash = COALESCE($1, password_hash) \
         WHERE id = $2 RETURNING generation",
    )
    .bind(new_password_hash)
    .bind(id);
    crate::backend::written(query.fetch_all(db)).await
}

/// Ends every cookie the admin token bought (signing out with one): the token's new
/// generation.
pub async fn end_token_sessions(db: &Db) -> sqlx::Result<i64> {
    let query =
        sqlx::query_scalar("UPDATE admin_token SET generation = generation + 1 WHERE id = 1 RETURNING generation");
    crate::backend::written(query.fetch_all(db)).await?.ok_or(sqlx::Error::RowNotFound)
}

/// What a removal or a change of role did: the operator's role before, or why not.
pub type Changed = Result<Role, AppError>;

/// Removes the operator named `name`, unless they are the last admin.
pub async fn remove(db: &Db, name: &str) -> sqlx::Result<Changed> {
    keeping_an_admin(db, name, None).await
}

/// Gives the operator named `name` the role `role`, unless that demotes the last admin.
pub async fn set_role(db: &Db, name: &str, role: Role) -> sqlx::Result<Changed> {
    keeping_an_admin(db, name, Some(role)).await
}

/// Removes the operator named `name` (`role`: `None`) or gives them `role`, in a
/// transaction that is undone if it took away the last admin. Every admin row is
/// locked first (an update that changes nothing): two admins removing each other at
/// once are decided one after the other, so the second sees the first's removal.
async fn keeping_an_admin(db: &Db, name: &str, role: Option<Role>) -> sqlx::Result<Changed> {
    let mut tx = db.begin().await?;
    sqlx::query("UPDATE operators SET generation = generation WHERE role = 'admin'").execute(&mut *tx).await?;
    let before: Option<String> =
        sqlx::query_scalar("SELECT role FROM operators WHERE name = $1").bind(name).fetch_optional(&mut *tx).await?;
    let Some(before) = before.and_then(|r| Role::from_name(&r)) else {
        return Ok(Err(ErrorCode::UnknownOperator.into()));
    };
    match role {
        None => sqlx::query("DELETE FROM operators WHERE name = $1").bind(name).execute(&mut *tx).await?,
        Some(role) => {
            let sql = "UPDATE operators SET role = $1 WHERE name = $2";
            sqlx::query(sql).bind(role.as_str()).bind(name).execute(&mut *tx).await?
        }
    };
    let admins: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM operators WHERE role = 'admin'").fetch_one(&mut *tx).await?;
    if before == Role::Admin && admins == 0 {
        tx.rollback().await?;
        return Ok(Err(ErrorCode::LastAdmin.into()));
    }
    tx.commit().await?;
    Ok(Ok(before))
}

/// An operator as this process last read them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub role: Role,
    pub generation: i64,
}

/// The id the admin token's entry has in [`Directory`] (operators' ids start at 1):
/// its cookies are followed and ended as operators' are.
pub const TOKEN_ID: i64 = 0;

/// How old the copy may grow while reads fail (the database away) before operators'
/// cookies are refused: a removal made meanwhile must not go unseen for long.
pub const STALE_AFTER: Duration = Duration::from_secs(10);

/// This process's copy of the operators table (see the module's doc).
#[derive(Default)]
pub struct Directory {
    /// The copy, the read it came from, and when it was taken.
    by_id: RwLock<(HashMap<i64, Entry>, u64, Option<std::time::Instant>)>,
    /// Reads begun: a read that began before another and ends after it is stale
    /// (it may not see a change the other was made to show), and is dropped.
    reads: AtomicU64,
}

impl Directory {
    /// The operator `id`, if a cookie of `generation` is still theirs.
    pub fn current(&self, id: i64, generation: i64) -> Option<Entry> {
        self.now(id).filter(|e| e.generation == generation)
    }

    /// The generation of `id`'s cookies now, unless the copy is stale.
    pub fn current_generation(&self, id: i64) -> Option<i64> {
        self.now(id).map(|e| e.generation)
    }

    /// `id` as the copy has them, unless it is stale.
    fn now(&self, id: i64) -> Option<Entry> {
        let by_id = self.by_id.read().unwrap_or_else(|e| e.into_inner());
        let fresh = by_id.2.is_some_and(|at| at.elapsed() < STALE_AFTER);
        by_id.0.get(&id).filter(|_| fresh).cloned()
    }

    /// Whether the copy is [`STALE_AFTER`] old (or none was read yet): no operator's
    /// cookie can be told on or ended by it.
    pub fn is_stale(&self) -> bool {
        let by_id = self.by_id.read().unwrap_or_else(|e| e.into_inner());
        by_id.2.is_none_or(|at| at.elapsed() >= STALE_AFTER)
    }

    /// Takes a fresh read of the whole table.
    pub fn replace(&self, entries: HashMap<i64, Entry>) {
        let read = self.reads.fetch_add(1, Ordering::SeqCst) + 1;
        self.take(entries, read);
    }

    /// Takes the table as read `read` found it, unless a later read is in already.
    fn take(&self, entries: HashMap<i64, Entry>, read: u64) {
        let mut by_id = self.by_id.write().unwrap_or_else(|e| e.into_inner());
        if read > by_id.1 {
            *by_id = (entries, read, Some(std::time::Instant::now()));
        }
    }

    /// Reads the table again (as the follower does, and a process right after a change
    /// it made, so its next request sees it).
    pub async fn catch_up(&self, db: &Db) -> sqlx::Result<()> {
        let read = self.reads.fetch_add(1, Ordering::SeqCst) + 1;
        let rows: Vec<(i64, String, String, i64)> = sqlx::query_as(
            "SELECT id, name, role, generation FROM operators \
             UNION ALL SELECT $1, 'token', 'admin', generation FROM admin_token",
        )
        .bind(TOKEN_ID)
        .fetch_all(db)
        .await?;
        let entries = rows.into_iter().filter_map(|(id, name, role, generation)| {
            Some((id, Entry { name, role: Role::from_name(&role)?, generation }))
        });
        self.take(entries.collect(), read);
        Ok(())
    }
}

/// Reads the table every [`REVOCATIONS_READ_EVERY`] until shutdown. A failed read keeps the
/// last one, for [`STALE_AFTER`] at most: then operators' cookies are refused until a
/// read succeeds (the admin token still works).
pub fn follow(directory: Arc<Directory>, db: Db, shutdown: Shutdown) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut rounds = crate::shutdown::interval(REVOCATIONS_READ_EVERY);
        while shutdown.tick(&mut rounds).await {
            if let Err(e) = directory.catch_up(&db).await {
                tracing::warn!("operators: {e}");
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_begun_before_another_and_ended_after_it_is_dropped() {
        let directory = Directory::default();
        let entry = |role| Entry { name: "olga".into(), role, generation: 0 };
        // A follower's read begins, then a change's read begins and ends first.
        let stale = directory.reads.fetch_add(1, Ordering::SeqCst) + 1;
        let fresh = directory.reads.fetch_add(1, Ordering::SeqCst) + 1;
        directory.take([(7, entry(Role::Operator))].into(), fresh);
        directory.take([(7, entry(Role::Admin))].into(), stale);
        assert_eq!(directory.current(7, 0).map(|e| e.role), Some(Role::Operator), "the later read stands");
        directory.replace(Default::default());
        assert_eq!(directory.current(7, 0), None, "a new read is taken");
    }
}
