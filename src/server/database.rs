//! The database: the pool opened for `DATABASE_URL` (SQLite or PostgreSQL, each set
//! up for this workload), and the migrations of its engine.

use super::ServeError;
use crate::backend::Db;
use sqlx::{any::AnyPoolOptions, Connection, Executor};
use std::{path::Path, time::Duration};

/// Opens the pool for `DATABASE_URL`. SQLite (the one-box default): the file and its
/// folder are created when missing, WAL journal, `NORMAL` sync, `busy` as the busy
/// timeout, and temporary data in memory (the worker's batch insert needs a statement
/// journal: as a file, SQLite created, wrote and deleted one per batch). PostgreSQL:
/// the URL as given, with `busy` as the lock timeout.
pub async fn open(url: &str, busy: Duration) -> Result<Db, ServeError> {
    let sqlite = is_sqlite(url);
    open_pool(url, busy, if sqlite { 8 } else { 16 }).await
}

/// A pool of one connection for the followers of revocations (ended sessions, the
/// operators): with a connection of their own, a revocation reaches this process
/// within their read's period however busy the main pool is (a storm's requests and
/// batches, writes waiting on a lock), as a revoked credential must stop working
/// everywhere within a second. Their reads are a few a second, each a quick query.
pub async fn open_followers(url: &str, busy: Duration) -> Result<Db, ServeError> {
    open_pool(url, busy, 1).await
}

/// [`open`], with at most `connections` connections.
async fn open_pool(url: &str, busy: Duration, connections: u32) -> Result<Db, ServeError> {
    sqlx::any::install_default_drivers();
    let sqlite = is_sqlite(url);
    let mut url = url.to_owned();
    if sqlite {
        let path = url.trim_start_matches("sqlite://").trim_start_matches("sqlite:");
        let path = path.split('?').next().unwrap_or_default();
        if let Some(dir) = Path::new(path).parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        if !url.contains("mode=") {
            url.push_str(if url.contains('?') { "&mode=rwc" } else { "?mode=rwc" });
        }
    }
    let pragmas = format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = {}; \
         PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY",
        busy.as_millis()
    );
    // PostgreSQL's counterpart of the busy timeout: a write waits this long for a lock;
    // and a transaction left idle (its process frozen, or cut off) is ended.
    let lock_timeout = format!("SET lock_timeout = {}", busy.as_millis());
    let idle_timeout = format!("SET idle_in_transaction_session_timeout = {}", IDLE_IN_TRANSACTION.as_millis());
    let pool = AnyPoolOptions::new()
        .max_connections(connections)
        // sqlx pings a connection when it goes back to the pool, and by default again
        // when it is taken: a round trip to the database (on SQLite, to the connection's
        // thread and back) per use, besides the statement. A connection idle for less
        // than `PING_IF_IDLE` was pinged when released, so it is handed out as is (after
        // a database restart, each such connection fails one statement, then is closed).
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= PING_IF_IDLE {
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
        // A connection that comes back still inside a transaction is closed, which ends
        // the transaction ([`in_transaction`]).
        .after_release(|conn, _| {
            Box::pin(async move {
                if in_transaction(conn) {
                    // A dropped transaction's rollback is queued; on SQLite it runs, on
                    // the connection's own thread, before the ping is answered.
                    conn.ping().await?;
                }
                Ok(!in_transaction(conn))
            })
        })
        .after_connect(move |conn, _| {
            let (pragmas, lock_timeout, idle_timeout) = (pragmas.clone(), lock_timeout.clone(), idle_timeout.clone());
            Box::pin(async move {
                if sqlite {
                    conn.execute(pragmas.as_str()).await?;
                } else {
                    conn.execute(lock_timeout.as_str()).await?;
                    conn.execute(idle_timeout.as_str()).await?;
                }
                Ok(())
            })
        })
        .connect(&url)
        .await?;
    Ok(pool)
}

/// How long PostgreSQL lets a transaction sit idle before it ends it (and its locks):
/// longer than any wait a transaction makes on purpose (a rebuild's for Redis,
/// `REBUILD_DEADLINE`, 2 s). A process frozen mid-transaction (stopped, swapped out,
/// its network cut) held the voucher's row lock for as long as it was frozen, and no
/// other process saved an order of that sale meanwhile (a drill, 2026-11-30: 30 s).
pub const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(10);

/// A pooled connection idle this long is pinged before it is handed out (a failed ping
/// closes it, and another is taken).
const PING_IF_IDLE: Duration = Duration::from_secs(1);

/// Whether sqlx counts `conn` inside a transaction. One whose rollback failed stays
/// counted so: on SQLite, a full disk can make SQLite end a transaction itself (a
/// failed commit), and the rollback sqlx then sends fails for want of one. Handed out
/// again, such a connection took each new transaction for a nested one (a savepoint),
/// and a rollback of one of those (`ROLLBACK TO`) left a real transaction open: from
/// then on every "commit" on it released a savepoint inside that transaction, answered
/// as done and never stored, while it held SQLite's write lock. A drill with a full
/// disk (2026-11-30) lost 1,124 of 2,000 orders so, acknowledged and reported saved.
fn in_transaction(conn: &mut sqlx::AnyConnection) -> bool {
    use sqlx::{Database, TransactionManager};
    <sqlx::Any as Database>::TransactionManager::get_transaction_depth(conn) > 0
}

/// SQLite or PostgreSQL, by the URL's scheme.
fn is_sqlite(url: &str) -> bool {
    url.starts_with("sqlite:")
}

/// Runs the migrations of the engine behind `url` (`migrations/sqlite` or
/// `migrations/postgres`: the same schema, each in its engine's dialect).
pub async fn migrate(db: &Db, url: &str) -> Result<(), ServeError> {
    if is_sqlite(url) {
        sqlx::migrate!("./migrations/sqlite").run(db).await?;
    } else {
        sqlx::migrate!("./migrations/postgres").run(db).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::Connection;

    /// A connection whose transaction SQLite ended itself (as on a full disk), so that
    /// sqlx's rollback of it fails, is not used again: a transaction made after it is
    /// stored. Before, a later rollback on it left a transaction open, and a "commit"
    /// after that stored nothing (the drill of [`in_transaction`]).
    #[tokio::test]
    async fn a_connection_left_counting_a_transaction_is_not_used_again() {
        let dir = tempfile::TempDir::new().unwrap();
        let url = format!("sqlite://{}/t.db", dir.path().display());
        let db = open_pool(&url, Duration::from_secs(1), 1).await.unwrap();
        sqlx::query("CREATE TABLE t (n INTEGER)").execute(&db).await.unwrap();
        let mut tx = db.begin().await.unwrap();
        sqlx::query("INSERT INTO t VALUES (1)").execute(&mut *tx).await.unwrap();
        // SQLite ends the transaction behind sqlx's back; sqlx's rollback then fails.
        sqlx::query("COMMIT").execute(&mut *tx).await.unwrap();
        drop(tx);
        let mut tx = db.begin().await.unwrap();
        sqlx::query("INSERT INTO t VALUES (2)").execute(&mut *tx).await.unwrap();
        tx.rollback().await.unwrap();
        let mut tx = db.begin().await.unwrap();
        sqlx::query("INSERT INTO t VALUES (3)").execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();

        let mut other = sqlx::AnyConnection::connect(&url).await.unwrap();
        let stored: Vec<i64> = sqlx::query_scalar("SELECT n FROM t ORDER BY n").fetch_all(&mut other).await.unwrap();
        assert_eq!(stored, [1, 3], "the committed rows, as another connection reads them");
    }
}
