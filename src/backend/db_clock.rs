//! The database's clock: the one clock of the order lifecycle. An order's deadline is
//! set when it is saved, and checked when it is paid and when it is swept, each by
//! this clock, so every process agrees on when an order is overdue whatever its own
//! clock says (a process whose clock runs fast must not cancel orders early). On
//! PostgreSQL it is the server's; on SQLite, the one machine's.
//!
//! Each engine reads its clock with a function of its own: the expressions are macros
//! so statements written per engine (`orders::store`) can splice them in.

use super::Db;
use sqlx::{Acquire, AnyConnection};

/// What sqlx's `Any` driver calls a PostgreSQL connection.
pub const POSTGRES: &str = "PostgreSQL";

/// The time (Unix ms) on PostgreSQL, as a statement that runs now reads it (not when
/// its transaction began: a transaction may have waited long for a lock).
macro_rules! now_ms_postgres {
    () => {
        "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
    };
}
/// The time (Unix ms) on SQLite (Julian days since the Unix epoch's).
macro_rules! now_ms_sqlite {
    () => {
        "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"
    };
}
pub(crate) use {now_ms_postgres, now_ms_sqlite};

/// The database's time now, in Unix ms.
pub async fn now_ms(db: &Db) -> sqlx::Result<i64> {
    let mut pooled = db.acquire().await?;
    now_ms_on(pooled.acquire().await?).await
}

/// [`now_ms`] on a connection of one's own (a transaction's).
pub async fn now_ms_on(conn: &mut AnyConnection) -> sqlx::Result<i64> {
    let sql = if conn.backend_name() == POSTGRES {
        concat!("SELECT ", now_ms_postgres!())
    } else {
        concat!("SELECT ", now_ms_sqlite!())
    };
    sqlx::query_scalar(sql).fetch_one(conn).await
}
