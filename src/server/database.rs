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
    // PostgreSQL's counterpart of the busy timeout: a write waits this long for a lock.
    let lock_timeout = format!("SET lock_timeout = {}", busy.as_millis());
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
        .after_connect(move |conn, _| {
            let (pragmas, lock_timeout) = (pragmas.clone(), lock_timeout.clone());
            Box::pin(async move {
                if sqlite {
                    conn.execute(pragmas.as_str()).await?;
                } else {
                    conn.execute(lock_timeout.as_str()).await?;
                }
                Ok(())
            })
        })
        .connect(&url)
        .await?;
    Ok(pool)
}

/// A pooled connection idle this long is pinged before it is handed out (a failed ping
/// closes it, and another is taken).
const PING_IF_IDLE: Duration = Duration::from_secs(1);

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
