//! A name for a person (a shopper's, an operator's) is one nobody can pass off as
//! another's: a new name that looks like one taken (another case, a full-width copy,
//! Cyrillic letters for Latin ones, spaces doubled) is taken, and a name with characters
//! nobody sees (zero-width, a direction override) is refused.

use crate::support::{code, wait_until, TestApp, PASSWORD};
use serde_json::{json, Value};

async fn sign_up(app: &TestApp, name: &str) -> (u16, Value) {
    let (status, body) = app.call("sign_up", json!({ "name": name, "password": PASSWORD }), &[]).await;
    (status.as_u16(), body)
}

async fn sign_in(app: &TestApp, name: &str) -> (u16, Value) {
    let (status, body) = app.call("sign_in", json!({ "name": name, "password": PASSWORD }), &[]).await;
    (status.as_u16(), body)
}

async fn add_operator(app: &TestApp, name: &str) -> (u16, Value) {
    let body = json!({ "name": name, "password": "an operator's password", "role": "operator" });
    let (status, body) = app.operator("add_operator", body).await;
    (status.as_u16(), body)
}

/// Names that read as `alice` but are not the same string.
const LIKE_ALICE: [&str; 9] = [
    "Alice",
    "ALICE",
    "AIice",                                    // a capital I
    "a\u{fe31}ice",                             // a vertical dash
    "\u{ff41}\u{ff4c}\u{ff49}\u{ff43}\u{ff45}", // full width
    "\u{0430}lice",                             // Cyrillic a
    "al\u{0456}ce",                             // Cyrillic i
    "a\u{217c}ice",                             // the Roman numeral fifty
    "alic\u{0435}\u{fe00}",                     // Cyrillic e, and a variation selector
];

/// Names whose characters some readers cannot see: zero-width, a right-to-left
/// override, a soft hyphen, a line separator, a Hangul filler, private use, nothing
/// visible at all.
const INVISIBLE: [&str; 9] = [
    "alice\u{200b}",
    "\u{202e}ecila",
    "ali\u{ad}ce",
    "a\u{2028}b",
    "\u{3164}",
    "bob\u{e000}",
    "\u{301}\u{301}",
    "\u{2800}",
    "alice\u{2800}",
];

#[tokio::test]
async fn a_shoppers_name_that_passes_for_a_taken_one_is_taken() {
    let app = TestApp::spawn().await;
    assert_eq!(sign_up(&app, "alice").await.0, 200);
    assert_eq!(sign_up(&app, "mary ann").await.0, 200);
    assert_eq!(sign_up(&app, "Tom").await.0, 200);
    assert_eq!(sign_up(&app, "carl").await.0, 200);
    let others = ["mary  ann", "mary\u{3000}ann", "Mary Ann", "\u{0422}om", "\u{3f2}arl", "\u{3f9}ARL"];
    for like in LIKE_ALICE.into_iter().chain(others) {
        let (status, body) = sign_up(&app, like).await;
        assert_eq!(
            (status, code(&body), body["param"].as_str()),
            (409, "name_taken", Some("name")),
            "{like:?}: {body}"
        );
    }
    for unseen in INVISIBLE {
        let (status, body) = sign_up(&app, unseen).await;
        assert_eq!((status, code(&body), body["param"].as_str()), (400, "invalid_input", Some("name")), "{unseen:?}");
    }
    // Names that only look alike to a careless reader stay apart: they read differently.
    for other in ["alicia", "alice 2", "al ice", "Zoë", "zoe", "李小龍", "Ödegaard 🎈"] {
        let (status, body) = sign_up(&app, other).await;
        assert_eq!(status, 200, "{other:?}: {body}");
    }
    // A name is stored composed, and signed in with however the keyboard composes it.
    let (status, body) = sign_up(&app, "Rene\u{301}e").await;
    assert_eq!((status, body["name"].as_str()), (200, Some("Ren\u{e9}e")), "{body}");
    for typed in ["Ren\u{e9}e", "Rene\u{301}e"] {
        let (status, body) = sign_in(&app, typed).await;
        assert_eq!(status, 200, "{typed:?}: {body}");
    }
    app.stop().await;
}

#[tokio::test]
async fn an_operators_name_that_passes_for_a_taken_or_reserved_one_is_refused() {
    let app = TestApp::spawn().await;
    assert_eq!(add_operator(&app, "alice").await.0, 200);
    for like in LIKE_ALICE {
        let (status, body) = add_operator(&app, like).await;
        assert_eq!((status, code(&body)), (409, "name_taken"), "{like:?}: {body}");
    }
    for unseen in INVISIBLE.into_iter().chain(["t\u{043e}ken", "TOKEN", "\u{0422}OKEN", "command\u{a0}line"]) {
        let (status, body) = add_operator(&app, unseen).await;
        assert_eq!((status, code(&body), body["param"].as_str()), (400, "invalid_input", Some("name")), "{unseen:?}");
    }
    app.stop().await;
}

/// Accounts made without keys (before names were compared, or by a process of an
/// older release during a rolling upgrade) are keyed by the running processes within
/// seconds: a look-alike of one is then taken. Of two such accounts that pass for each
/// other one is keyed, and a name that new names may not hold still signs in.
#[tokio::test]
async fn names_made_without_keys_are_keyed_by_the_running_processes() {
    let app = TestApp::spawn().await;
    assert_eq!(sign_up(&app, "dora").await.0, 200);
    let older = [
        "INSERT INTO users (name, created_at) VALUES ('Bob', 0), ('B0B', 0)",
        "UPDATE users SET name = 'dora\u{200b}', name_key = NULL, name_shape = NULL WHERE name = 'dora'",
        "INSERT INTO operators (name, password_hash, role, created_at) VALUES ('Olga', 'x', 'operator', 0)",
    ];
    for statement in older {
        sqlx::query(statement).execute(&app.db).await.unwrap();
    }
    let keyed = |table: &'static str, names: &'static str| {
        let query = format!("SELECT COUNT(*) FROM {table} WHERE name IN ({names}) AND name_key IS NOT NULL");
        let db = app.db.clone();
        async move { sqlx::query_scalar::<_, i64>(&query).fetch_one(&db).await.unwrap() }
    };
    let within = std::time::Duration::from_secs(30);
    wait_until("the older names are keyed", within, || async {
        keyed("users", "'Bob', 'B0B', 'dora\u{200b}'").await == 2 && keyed("operators", "'Olga'").await == 1
    })
    .await;
    for (like, call) in [("bob", "sign_up"), ("BOB", "sign_up"), ("dora", "sign_up"), ("olga", "add_operator")] {
        let (status, body) = if call == "sign_up" { sign_up(&app, like).await } else { add_operator(&app, like).await };
        assert_eq!((status, code(&body)), (409, "name_taken"), "{like}: {body}");
    }
    let (status, body) = sign_in(&app, "dora\u{200b}").await;
    assert_eq!(status, 200, "{body}");
    app.stop().await;
}

/// A new account refused for something other than its name (here an index made for the
/// drill; in life, an id sequence left behind by a restore) is not answered as a name
/// taken: the conflict clause that lets a race for a name end in `name_taken` would
/// have hidden it (answered 409, logged nothing).
#[tokio::test]
async fn an_account_refused_for_another_reason_is_not_a_name_taken() {
    let app = TestApp::spawn().await;
    assert_eq!(sign_up(&app, "ann").await.0, 200);
    assert_eq!(add_operator(&app, "otto").await.0, 200);
    for table in ["users", "operators"] {
        let drill = format!("CREATE UNIQUE INDEX drill_{table} ON {table} ((password_hash IS NOT NULL))");
        sqlx::query(&drill).execute(&app.db).await.unwrap();
    }
    let (status, body) = sign_up(&app, "zed").await;
    assert_eq!((status, code(&body)), (503, "unavailable"), "{body}");
    let (status, body) = add_operator(&app, "zoe").await;
    assert_eq!((status, code(&body)), (503, "unavailable"), "{body}");
    app.stop().await;
}

/// An admin adds `ed` while another removes the old `ed`: the insert meets the old row,
/// which is gone by the time the refusal is looked into. The name is free, so the
/// insert is tried again and the new `ed` made, not answered 503 (as it was, now and
/// then, when the two calls raced). The race is laid out here step by step: the first
/// try answers "refused" and removes the old row, as the other admin's call would.
#[tokio::test]
async fn a_name_freed_as_its_insert_was_refused_is_made_on_a_new_try() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let app = TestApp::spawn().await;
    assert_eq!(add_operator(&app, "ed").await.0, 200);
    let name = seckill::testing::names::new_name("ed").unwrap();
    let tries = AtomicUsize::new(0);
    let insert = || async {
        if tries.fetch_add(1, SeqCst) == 0 {
            sqlx::query("DELETE FROM operators WHERE name = 'ed'").execute(&app.db).await?;
            return Ok(None);
        }
        let made = "INSERT INTO operators (name, password_hash, role, created_at) VALUES ('ed', 'x', 'operator', 0) \
                    RETURNING id";
        Ok(Some(sqlx::query_scalar::<_, i64>(made).fetch_one(&app.db).await?))
    };
    let made = seckill::testing::names::inserted(&app.db, "operators", &name, insert).await.unwrap();
    assert!(made.is_some(), "the freed name was not made: {made:?}");
    assert_eq!(tries.load(SeqCst), 2);
    // A name still held is taken, at the first try.
    let held = || async { Ok(None) };
    assert_eq!(seckill::testing::names::inserted(&app.db, "operators", &name, held).await.unwrap(), None);
    app.stop().await;
}
