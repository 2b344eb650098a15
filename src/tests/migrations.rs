//! Schema changes keep what an existing database holds.

use crate::support::fresh_database;
use seckill::testing::Db;
use sqlx::{any::AnyPoolOptions, migrate::Migrator};
use std::borrow::Cow;

/// The SQLite migration that rebuilds `orders` around the rowid.
const ROWID_ORDERS: i64 = 20261124000001;

/// Where a migration test runs.
#[derive(Clone, Copy, PartialEq)]
enum Engine {
    /// SQLite, whatever the run's engine (a SQLite migration's test).
    Sqlite,
    /// The run's: PostgreSQL in its pass, SQLite in the other.
    OfTheRun,
}

/// A database under `dir` (or on the run's PostgreSQL) made by the migrations before
/// `version`, and every migration of its engine, to run on it next.
async fn migrated_before(dir: &std::path::Path, version: i64, engine: Engine) -> (Db, Migrator) {
    let url = match engine {
        Engine::OfTheRun => fresh_database(dir).await,
        Engine::Sqlite => format!("sqlite://{}", dir.join("seckill.db").display()),
    };
    let (url, all, mut before) = if url.starts_with("sqlite:") {
        (format!("{url}?mode=rwc"), sqlx::migrate!("./migrations/sqlite"), sqlx::migrate!("./migrations/sqlite"))
    } else {
        (url, sqlx::migrate!("./migrations/postgres"), sqlx::migrate!("./migrations/postgres"))
    };
    sqlx::any::install_default_drivers();
    let db = AnyPoolOptions::new().max_connections(1).connect(&url).await.unwrap();
    before.migrations = Cow::Owned(all.migrations.iter().filter(|m| m.version < version).cloned().collect());
    before.run(&db).await.unwrap();
    (db, all)
}

/// Every column of an order.
type OrderRow = (i64, i64, i64, String, i64, i64, Option<i64>, Option<i64>, Option<String>);

/// A database made by the migrations before the rebuild, with orders in every state,
/// keeps them all through it (and through the later rebuild of `vouchers`); afterwards the id is the rowid (no second b-tree) and
/// still refuses a duplicate, and one live order per shopper still holds.
#[tokio::test]
async fn sqlite_orders_survive_the_rowid_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let (db, all) = migrated_before(dir.path(), ROWID_ORDERS, Engine::Sqlite).await;
    sqlx::raw_sql(
        "INSERT INTO users (id, name, created_at) VALUES (1, 'ann', 0), (2, 'bob', 0), (3, 'cy', 0); \
         INSERT INTO vouchers (id, title, stock, stock_left, begins_at, ends_at, created_at) VALUES (1, 'v', 9, 6, 0, 1, 0); \
         INSERT INTO orders (id, voucher_id, user_id, status, created_at, pay_deadline) VALUES (8589934593, 1, 1, 'unpaid', 5, 7); \
         INSERT INTO orders (id, voucher_id, user_id, status, created_at, pay_deadline, paid_at) VALUES (8589934594, 1, 2, 'paid', 5, 7, 6); \
         INSERT INTO orders (id, voucher_id, user_id, status, created_at, pay_deadline, cancelled_at, cancel_reason) \
             VALUES (8589934595, 1, 3, 'cancelled', 5, 7, 8, 'timeout');",
    )
    .execute(&db)
    .await
    .unwrap();
    let dump =
        "SELECT id, voucher_id, user_id, status, created_at, pay_deadline, paid_at, cancelled_at, cancel_reason \
                FROM orders ORDER BY id";
    let old: Vec<OrderRow> = sqlx::query_as(dump).fetch_all(&db).await.unwrap();

    all.run(&db).await.unwrap();

    let new: Vec<OrderRow> = sqlx::query_as(dump).fetch_all(&db).await.unwrap();
    assert_eq!(new, old);
    assert_eq!(old.len(), 3);
    let autoindexes: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM sqlite_master WHERE tbl_name = 'orders' AND name LIKE 'sqlite_autoindex%'",
    )
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(autoindexes, 0, "the id is the rowid, not an index of its own");
    let insert = "INSERT INTO orders (id, voucher_id, user_id, status, created_at, pay_deadline) VALUES ($1, 1, $2, 'unpaid', 5, 7)";
    assert!(sqlx::query(insert).bind(8589934593_i64).bind(3).execute(&db).await.is_err(), "duplicate id");
    assert!(sqlx::query(insert).bind(8589934596_i64).bind(1).execute(&db).await.is_err(), "second live order");
    sqlx::query(insert).bind(8589934597_i64).bind(3).execute(&db).await.unwrap();

    // The vouchers table rebuilt to run sales (20261127000001) kept its row, which
    // takes the new columns' defaults, and its ids go on from where they were.
    type Voucher = (i64, String, i64, i64, i64, i64, i64, i64, i64, i64);
    let voucher: Voucher = sqlx::query_as(
        "SELECT id, title, stock, stock_left, begins_at, ends_at, price, face_value, paused, version FROM vouchers",
    )
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(voucher, (1, "v".into(), 9, 6, 0, 1, 0, 0, 0, 1));
    let next: i64 = sqlx::query_scalar(
        "INSERT INTO vouchers (title, stock, stock_left, begins_at, ends_at, created_at) VALUES ('w', 0, 0, 0, 1, 0) RETURNING id",
    )
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(next, 2, "a sale whose every unit was withdrawn has 0");
    let prices: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orders WHERE price = 0").fetch_one(&db).await.unwrap();
    assert_eq!(prices, 4, "orders from before prices cost 0");
}

/// On either engine an order names a shopper and a voucher that exist, and a shopper
/// or voucher with orders cannot be deleted (SQLite: foreign keys; PostgreSQL: checks
/// run once per insert statement, see its migration 20261125000001).
#[tokio::test]
async fn orders_keep_their_shopper_and_voucher() {
    let app = crate::support::TestApp::with(crate::support::Options::default().with(|c| c.worker = false)).await;
    let v = app.create_voucher(5, -5, 3600).await;
    let (ann, bob) = (app.sign_in("ann").await, app.sign_in("bob").await);
    let insert = "INSERT INTO orders (id, voucher_id, user_id, status, created_at, pay_deadline) \
                  VALUES ($1, $2, $3, 'unpaid', 5, 7)";
    let order = |id: i64, voucher: i64, user: i64| sqlx::query(insert).bind(id).bind(voucher).bind(user);
    let missing = 1 << 40;
    assert!(order(1, v, missing).execute(&app.db).await.is_err(), "a shopper who does not exist");
    assert!(order(2, missing, ann.user_id).execute(&app.db).await.is_err(), "a voucher that does not exist");
    order(3, v, ann.user_id).execute(&app.db).await.unwrap();
    let moved = sqlx::query("UPDATE orders SET user_id = $1 WHERE id = 3").bind(missing).execute(&app.db).await;
    assert!(moved.is_err(), "an order moved to a shopper who does not exist");

    let delete_user = "DELETE FROM users WHERE id = $1";
    assert!(sqlx::query(delete_user).bind(ann.user_id).execute(&app.db).await.is_err(), "a shopper with an order");
    let delete_voucher = sqlx::query("DELETE FROM vouchers WHERE id = $1").bind(v).execute(&app.db).await;
    assert!(delete_voucher.is_err(), "a voucher with an order");
    sqlx::query(delete_user).bind(bob.user_id).execute(&app.db).await.unwrap();
    let orders: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orders").fetch_one(&app.db).await.unwrap();
    assert_eq!(orders, 1);
    app.stop().await;
}

/// A record of unsettled orders gets an id never handed out before, even once every
/// earlier one is struck: a worker striking its record late (the sweeper struck it
/// first) must not strike a newer one of another worker's. SQLite's plain rowid gave
/// the emptied table's next record the same id (the review of 2026-11-29).
#[tokio::test]
async fn unsettled_records_never_reuse_an_id() {
    let app = crate::support::TestApp::with(crate::support::Options::default().with(|c| c.worker = false)).await;
    let record = || async {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO unsettled_batches (voucher_id, orders, saved_at) VALUES (1, '[]', 0) RETURNING id",
        )
        .fetch_one(&app.db)
        .await
        .unwrap();
        sqlx::query("DELETE FROM unsettled_batches WHERE id = $1").bind(id).execute(&app.db).await.unwrap();
        id
    };
    let first = record().await;
    assert_ne!(record().await, first, "the emptied table's next record");
    app.stop().await;
}

/// The migration that bounds sale windows.
const TIMES_IN_RANGE: i64 = 20261204000001;

/// Sales made before their windows were bounded, with times no client reads back (a
/// year of -1 or 10000 in UTC), are brought into range, each still ending after it
/// begins; a sale in range is left as it was (the review of 2026-11-30). On either
/// engine.
#[tokio::test]
async fn sale_times_no_client_reads_are_brought_into_range() {
    let dir = tempfile::tempdir().unwrap();
    let (db, all) = migrated_before(dir.path(), TIMES_IN_RANGE, Engine::OfTheRun).await;
    let (year_minus_one, year_10000, now) = (-62_167_222_800_000_i64, 253_402_318_799_000_i64, 1_796_119_200_000_i64);
    // In this order (read back by id).
    let sale =
        "INSERT INTO vouchers (title, stock, stock_left, begins_at, ends_at, created_at) VALUES ('v', 1, 1, $1, $2, 0)";
    for (begins, ends) in [(year_minus_one, now), (now, year_10000), (year_10000 - 1, year_10000), (now, now + 1)] {
        sqlx::query(sale).bind(begins).bind(ends).execute(&db).await.unwrap();
    }
    all.run(&db).await.unwrap();
    let windows: Vec<(i64, i64)> =
        sqlx::query_as("SELECT begins_at, ends_at FROM vouchers ORDER BY id").fetch_all(&db).await.unwrap();
    let last = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
    assert_eq!(windows, [(0, now), (now, last), (last - 1, last), (now, now + 1)]);
    for (begins, ends) in windows {
        for ms in [begins, ends] {
            let written = chrono::DateTime::from_timestamp_millis(ms).unwrap().to_rfc3339();
            assert!(written.len() < 30 && !written.starts_with(['+', '-']), "{written}");
        }
    }
}
