//! A name for a person (a shopper's, an operator's) is one nobody can pass off as
//! another's: a new name that looks like one taken (another case, a full-width copy,
//! Cyrillic letters for Latin ones, spaces doubled) is taken, and a name with characters
//! nobody sees (zero-width, a direction override) is refused.

use crate::support::{code, TestApp, PASSWORD};
use serde_json::{json, Value};

async fn sign_up(app: &TestApp, name: &str) -> (u16, Value) {
    let (status, body) = app.call("sign_up", json!({ "name": name, "password": PASSWORD }), &[]).await;
    (status.as_u16(), body)
}

async fn add_operator(app: &TestApp, name: &str) -> (u16, Value) {
    let body = json!({ "name": name, "password": "an operator's password", "role": "operator" });
    let (status, body) = app.operator("add_operator", body).await;
    (status.as_u16(), body)
}

/// Names that read as `alice` (or `mary ann`) but are not the same string.
const LIKE_ALICE: [&str; 7] = [
    "Alice",
    "ALICE",
    "\u{ff41}\u{ff4c}\u{ff49}\u{ff43}\u{ff45}", // full width
    "\u{0430}lice",                             // Cyrillic a
    "al\u{0456}ce",                             // Cyrillic i
    "a\u{217c}ice",                             // the Roman numeral fifty
    "alic\u{0435}\u{fe00}",                     // Cyrillic e, and a variation selector
];

/// Names whose characters some readers cannot see: zero-width, a right-to-left
/// override, a soft hyphen, a line separator, a Hangul filler, private use, nothing
/// visible at all.
const INVISIBLE: [&str; 7] =
    ["alice\u{200b}", "\u{202e}ecila", "ali\u{ad}ce", "a\u{2028}b", "\u{3164}", "bob\u{e000}", "\u{301}\u{301}"];

#[tokio::test]
async fn a_shoppers_name_that_passes_for_a_taken_one_is_taken() {
    let app = TestApp::spawn().await;
    assert_eq!(sign_up(&app, "alice").await.0, 200);
    assert_eq!(sign_up(&app, "mary ann").await.0, 200);
    for like in LIKE_ALICE.into_iter().chain(["mary  ann", "mary\u{3000}ann", "Mary Ann"]) {
        let (status, body) = sign_up(&app, like).await;
        assert_eq!((status, code(&body)), (409, "name_taken"), "{like:?}: {body}");
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
    for unseen in INVISIBLE.into_iter().chain(["t\u{043e}ken", "TOKEN", "command\u{a0}line"]) {
        let (status, body) = add_operator(&app, unseen).await;
        assert_eq!((status, code(&body), body["param"].as_str()), (400, "invalid_input", Some("name")), "{unseen:?}");
    }
    app.stop().await;
}

/// Accounts made before names were compared so (their rows have no comparison key)
/// are compared from the next start: a look-alike of one is then taken. Of two older
/// accounts that pass for each other one keeps the comparison, and an older name that
/// new names may not hold still signs in.
#[tokio::test]
async fn names_made_before_the_comparison_are_compared_after_a_restart() {
    let app = TestApp::spawn().await;
    assert_eq!(sign_up(&app, "dora").await.0, 200);
    let older = [
        "INSERT INTO users (name, created_at) VALUES ('Bob', 0), ('BOB', 0)",
        "UPDATE users SET name = 'dora\u{200b}', name_key = NULL WHERE name = 'dora'",
        "INSERT INTO operators (name, password_hash, role, created_at) VALUES ('Olga', 'x', 'operator', 0)",
    ];
    for statement in older {
        sqlx::query(statement).execute(&app.db).await.unwrap();
    }
    let again = app.restart_options();
    app.stop().await;
    let app = TestApp::with(again).await;
    for (like, call) in [("bob", "sign_up"), ("dora", "sign_up"), ("olga", "add_operator")] {
        let (status, body) = if call == "sign_up" { sign_up(&app, like).await } else { add_operator(&app, like).await };
        assert_eq!((status, code(&body)), (409, "name_taken"), "{like}: {body}");
    }
    let keyed: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM users WHERE name IN ('Bob', 'BOB') AND name_key IS NOT NULL")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(keyed, 1, "one of two older names that pass for each other");
    let (status, body) = app.call("sign_in", json!({ "name": "dora\u{200b}", "password": PASSWORD }), &[]).await;
    assert_eq!(status, 200, "{body}");
    app.stop().await;
}
