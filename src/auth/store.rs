//! Users and ended sessions in SQL.

use super::names::{self, NewName};
use crate::backend::{
    db_clock::{now_ms_postgres, now_ms_sqlite, POSTGRES},
    Db,
};

/// What signing in as a name needs: the user, the password hash (`None` for an
/// account from before passwords) and the session generation new cookies carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub user_id: i64,
    pub name: String,
    pub password_hash: Option<String>,
    pub generation: i64,
}

type CredentialsRow = (i64, String, Option<String>, i64);

fn credentials((user_id, name, password_hash, generation): CredentialsRow) -> Credentials {
    Credentials { user_id, name, password_hash, generation }
}

/// A new user with this name and password hash; `None` when the name, or one that
/// passes for it, is taken.
pub async fn create(db: &Db, name: &NewName, password_hash: &str) -> sqlx::Result<Option<i64>> {
    let insert = || {
        let query = sqlx::query_scalar(
            "INSERT INTO users (name, name_key, name_shape, password_hash, created_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT DO NOTHING RETURNING id",
        )
        .bind(&name.name)
        .bind(&name.keys.case)
        .bind(&name.keys.shape)
        .bind(password_hash)
        .bind(chrono::Utc::now().timestamp_millis());
        crate::backend::written(query.fetch_all(db))
    };
    names::inserted(db, "users", name, insert).await
}

/// The credentials of the user with this name.
pub async fn by_name(db: &Db, name: &str) -> sqlx::Result<Option<Credentials>> {
    let row: Option<CredentialsRow> =
        sqlx::query_as("SELECT id, name, password_hash, session_generation FROM users WHERE name = $1")
            .bind(name)
            .fetch_optional(db)
            .await?;
    Ok(row.map(credentials))
}

/// One row of `sessions_ended`: a single session (`session_id`) or every session of
/// the user issued below `generation`.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct EndedRow {
    pub id: i64,
    pub user_id: i64,
    pub session_id: Option<String>,
    pub generation: Option<i64>,
    pub expires_at: i64,
}

/// Most sessions of one account ended one by one and still in force: past it, a
/// sign-out ends every session of the account at once (one generation row in their
/// place), so a loop of signing in and out cannot grow the table or any process's
/// memory ([`super::ended_sessions`]).
pub const MAX_ENDED_PER_ACCOUNT: i64 = 32;

/// Ends one session: its cookie, valid until `expires_at`, is refused from now on. Past
/// [`MAX_ENDED_PER_ACCOUNT`], every session of the user is ended instead (each cookie
/// lives `lifetime_ms` at most).
pub async fn end_session(
    db: &Db,
    user_id: i64,
    session_id: &str,
    expires_at: i64,
    lifetime_ms: i64,
) -> sqlx::Result<EndedRow> {
    let now = chrono::Utc::now().timestamp_millis();
    // The write first: it takes SQLite's write lock at once, where a read first could
    // meet another writer's commit when it upgrades (SQLITE_BUSY_SNAPSHOT).
    let mut tx = db.begin().await?;
    let row = insert_ended(&mut tx, user_id, Some(session_id), None, expires_at).await?;
    let held: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM sessions_ended WHERE user_id = $1 AND session_id IS NOT NULL AND expires_at > $2",
    )
    .bind(user_id)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    let row = if held > MAX_ENDED_PER_ACCOUNT {
        sqlx::query("DELETE FROM sessions_ended WHERE user_id = $1 AND session_id IS NOT NULL")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        end_every_session(&mut tx, user_id, None, now + lifetime_ms).await?
    } else {
        row
    };
    tx.commit().await?;
    Ok(row)
}

/// Ends every session of the user (and sets a new password hash, if given), in one
/// transaction: the user's generation goes up, and cookies issued below it, which
/// live until `lifetime_ms` from now at the latest, are refused.
pub async fn end_all_sessions(
    db: &Db,
    user_id: i64,
    new_password_hash: Option<&str>,
    lifetime_ms: i64,
) -> sqlx::Result<EndedRow> {
    let mut tx = db.begin().await?;
    let expires_at = chrono::Utc::now().timestamp_millis() + lifetime_ms;
    let row = end_every_session(&mut tx, user_id, new_password_hash, expires_at).await?;
    tx.commit().await?;
    Ok(row)
}

/// Raises the user's generation and writes the row that says so, in `tx`.
async fn end_every_session(
    tx: &mut crate::backend::Tx<'_>,
    user_id: i64,
    new_password_hash: Option<&str>,
    expires_at: i64,
) -> sqlx::Result<EndedRow> {
    let generation: i64 = sqlx::query_scalar(
        "UPDATE users SET session_generation = session_generation + 1, \
         password_hash = COALESCE($1, password_hash) WHERE id = $2 RETURNING session_generation",
    )
    .bind(new_password_hash)
    .bind(user_id)
    .fetch_one(&mut **tx)
    .await?;
    let row = insert_ended(tx, user_id, None, Some(generation), expires_at).await?;
    // The user's rows before it end sessions this generation ends anyway: dropped, so
    // a user who changes their password again and again keeps one row, not one a
    // change for a week (every process reads them all when it starts).
    sqlx::query("DELETE FROM sessions_ended WHERE user_id = $1 AND id < $2")
        .bind(user_id)
        .bind(row.id)
        .execute(&mut **tx)
        .await?;
    Ok(row)
}

/// Writes a row of `sessions_ended`, in `tx`: one session of the user's ended
/// (`session_id`), or every session issued below `generation`. Its `ended_at` is the
/// database's clock as the row is written, the clock [`ended_since`] reads it by: a
/// process whose clock is behind, or a write that waited long for a connection, would
/// date it so far back that a follower that had read past its id skipped it for good.
async fn insert_ended(
    tx: &mut crate::backend::Tx<'_>,
    user_id: i64,
    session_id: Option<&str>,
    generation: Option<i64>,
    expires_at: i64,
) -> sqlx::Result<EndedRow> {
    macro_rules! insert_at {
        ($now:expr) => {
            concat!(
                "INSERT INTO sessions_ended (user_id, session_id, generation, ended_at, expires_at) \
                 VALUES ($1, $2, $3, ",
                $now,
                ", $4) RETURNING id, user_id, session_id, generation, expires_at"
            )
        };
    }
    let sql = if tx.backend_name() == POSTGRES { insert_at!(now_ms_postgres!()) } else { insert_at!(now_ms_sqlite!()) };
    let query = sqlx::query_as(sql).bind(user_id).bind(session_id).bind(generation).bind(expires_at);
    query.fetch_one(&mut **tx).await
}

/// Rows after `last_id`, and those ended in the last `late_ms` again, by the
/// database's clock (as [`insert_ended`] dates them).
pub async fn ended_since(db: &Db, last_id: i64, late_ms: i64) -> sqlx::Result<Vec<EndedRow>> {
    macro_rules! since {
        ($now:expr) => {
            concat!(
                "SELECT id, user_id, session_id, generation, expires_at FROM sessions_ended \
                 WHERE id > $1 OR ended_at > ",
                $now,
                " - $2 ORDER BY id"
            )
        };
    }
    let mut conn = db.acquire().await?;
    let sql = if conn.backend_name() == POSTGRES { since!(now_ms_postgres!()) } else { since!(now_ms_sqlite!()) };
    sqlx::query_as(sql).bind(last_id).bind(late_ms).fetch_all(&mut *conn).await
}

/// Drops rows whose cookies have all expired.
pub async fn drop_ended_before(db: &Db, now_ms: i64) -> sqlx::Result<()> {
    sqlx::query("DELETE FROM sessions_ended WHERE expires_at < $1").bind(now_ms).execute(db).await?;
    Ok(())
}

/// The user known by the shop login's `subject`, made on its first call: named after
/// the subject when that is a free name of at most 32 characters, else `shop-` and
/// random hex. A user made so has no password: only the shop's tokens sign it in.
pub async fn user_for_subject(db: &Db, subject: &str) -> sqlx::Result<i64> {
    let find = || sqlx::query_scalar("SELECT id FROM users WHERE subject = $1").bind(subject).fetch_optional(db);
    if let Some(id) = find().await? {
        return Ok(id);
    }
    let own_name = names::new_name(subject).ok().filter(|n| n.name == subject);
    let made_up = std::iter::once_with(|| names::made_up(format!("shop-{}", hex::encode(rand::random::<[u8; 8]>()))));
    for name in own_name.into_iter().chain(made_up) {
        // Two first calls may race, or the name (or one it passes for) be taken: then
        // nothing is inserted.
        let insert = "INSERT INTO users (name, name_key, name_shape, subject, created_at) \
                      VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING";
        sqlx::query(insert)
            .bind(&name.name)
            .bind(&name.keys.case)
            .bind(&name.keys.shape)
            .bind(subject)
            .bind(chrono::Utc::now().timestamp_millis())
            .execute(db)
            .await?;
        if let Some(id) = find().await? {
            return Ok(id);
        }
    }
    Err(sqlx::Error::RowNotFound)
}
