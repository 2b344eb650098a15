//! The shop page (`/`) as the burst of visitors before a sale gets it: one render,
//! the same for everyone, shared for a moment (`server::page_cache`).

use crate::support::{wait_until, Options, TestApp, SOON};
use chrono::{Duration as Days, Utc};
use futures::future::join_all;
use std::{collections::HashSet, time::Duration};

/// The page's HTML with the cookie given, if any; fails unless it answers 200.
async fn shop_page(app: &TestApp, cookie: Option<&str>) -> String {
    shop_page_at(app, "/", cookie).await
}

/// A 503 (a render that could not read its vouchers in time: busy, try again) is
/// asked again, as a reload would, until [`SOON`]: the PostgreSQL and Cluster pass,
/// loaded, answered one once.
async fn shop_page_at(app: &TestApp, path: &str, cookie: Option<&str>) -> String {
    let deadline = std::time::Instant::now() + SOON;
    loop {
        let mut req = app.http.get(format!("{}{path}", app.base));
        if let Some(cookie) = cookie {
            req = req.header("cookie", cookie);
        }
        let res = req.send().await.unwrap();
        if res.status() == 503 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        assert_eq!(res.status(), 200);
        return res.text().await.unwrap();
    }
}

/// The script nonce Leptos draws for each render: two pages with the same one came
/// from the same render.
fn render_of(page: &str) -> String {
    let start = page.find("nonce=\"").expect("a nonce in the page") + "nonce=\"".len();
    page[start..].split('"').next().unwrap().to_owned()
}

async fn new_voucher(app: &TestApp, title: &str) -> i64 {
    let now = Utc::now();
    app.api.create_voucher(title, 10, now - Days::minutes(1), now + Days::hours(1)).await.unwrap()
}

#[tokio::test]
async fn the_shop_page_is_the_same_for_every_visitor() {
    let app = TestApp::with(Options::default().with(|c| c.page_cache_ms = 60_000)).await;
    new_voucher(&app, "Lamp sale").await;
    let name = format!("visitor{}", rand::random::<u32>());
    let shopper = app.sign_in(&name).await;

    let signed_in = shop_page(&app, Some(&shopper.cookie)).await;
    assert!(signed_in.contains("Lamp sale"), "the sales are on the page");
    assert!(!signed_in.contains(&name), "a shared page names no shopper: the browser asks who is signed in");
    let anonymous = shop_page(&app, None).await;
    assert_eq!(render_of(&anonymous), render_of(&signed_in), "one render served both");
    assert_eq!(anonymous, signed_in);
    let from_a_link = shop_page_at(&app, "/?utm_source=mail", None).await;
    assert_eq!(from_a_link, signed_in, "the page reads no query: links with one share it");
    app.stop().await;
}

/// Each answer of the shared page says how old its render is (`Server-Timing: age`):
/// the gate's time the page carries plus that age is the gate's time when the answer
/// left, never ahead of it, and behind by no more than the render took. The page's script counts from it, so a Grab button opens
/// at the start, not up to two lifetimes (seconds) after it (a drill, 2026-11-30).
#[tokio::test]
async fn a_shared_page_says_how_old_its_render_is() {
    let app = TestApp::with(Options::default().with(|c| c.page_cache_ms = 60_000)).await;
    new_voucher(&app, "Clock sale").await;
    let gate_now = || async { app.call("server_time", serde_json::json!({}), &[]).await.1["now_ms"].as_i64().unwrap() };
    let first = render_of(&shop_page(&app, None).await);
    let served = || async {
        let before = gate_now().await;
        let res = app.http.get(format!("{}/", app.base)).send().await.unwrap();
        let timing = res.headers()["server-timing"].to_str().unwrap().to_owned();
        let age: i64 = timing.strip_prefix("age;dur=").expect("the render's age").parse().unwrap();
        let page = res.text().await.unwrap();
        let gate: i64 = page.split("data-gate=\"").nth(1).and_then(|r| r.split('"').next()).unwrap().parse().unwrap();
        (before, gate + age, age, gate_now().await, render_of(&page))
    };
    let deadline = std::time::Instant::now() + SOON;
    loop {
        let (before, sent, age, after, render) = served().await;
        assert_eq!(render, first, "one render, shared");
        assert!(sent <= after, "never ahead of the gate: sent at {sent}, the gate at {after} after");
        if age >= 1_000 {
            // The render is that old: its own time alone would be as far behind. (The
            // age counts from when the page was in hand, a render and its compression
            // after the gate's clock was read: tens of ms on a busy machine.)
            assert!(sent >= before - 500, "sent at {sent}, the gate at {before} before it was asked");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the render never got a second old");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    app.stop().await;
}

#[tokio::test]
async fn a_burst_of_visitors_waits_for_one_render() {
    let app = TestApp::with(Options::default().with(|c| c.page_cache_ms = 60_000)).await;
    new_voucher(&app, "Kettle sale").await;
    let pages = join_all((0..64).map(|_| shop_page(&app, None))).await;
    let renders: HashSet<String> = pages.iter().map(|p| render_of(p)).collect();
    assert_eq!(renders.len(), 1, "64 visitors at once, one render");
    assert!(pages[0].contains("Kettle sale"));
    app.stop().await;
}

/// A change made on this process dates its shared page once, at once: the sale-change
/// count it bumped is not taken, when this process next reads it, for a change it
/// missed. Before, it dated the page a second time, and a burst of visitors that
/// straddled that read got two renders.
#[tokio::test]
async fn a_change_made_here_dates_the_page_once() {
    let app = TestApp::with(Options::default().with(|c| c.page_cache_ms = 60_000)).await;
    new_voucher(&app, "Kettle sale").await;
    let first = render_of(&shop_page(&app, None).await);
    // Time passing is what is tested: the count is read every 250 ms.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(render_of(&shop_page(&app, None).await), first, "the page rendered after the change still stands");
    app.stop().await;
}

#[tokio::test]
async fn a_voucher_created_here_shows_on_the_next_page() {
    let app = TestApp::with(Options::default().with(|c| c.page_cache_ms = 60_000)).await;
    let before = shop_page(&app, None).await;
    assert_eq!(render_of(&shop_page(&app, None).await), render_of(&before), "shared while nothing changed");
    new_voucher(&app, "Toaster sale").await;
    let after = shop_page(&app, None).await;
    assert!(after.contains("Toaster sale"), "not the page rendered before it");
    assert_ne!(render_of(&after), render_of(&before));
    app.stop().await;
}

#[tokio::test]
async fn with_the_cache_off_every_visit_renders() {
    let app = TestApp::with(Options::default().with(|c| c.page_cache_ms = 0)).await;
    let (first, second) = (shop_page(&app, None).await, shop_page(&app, None).await);
    assert_ne!(render_of(&first), render_of(&second));
    app.stop().await;
}

#[tokio::test]
async fn an_expired_page_is_served_while_one_render_replaces_it() {
    // An expired page is served for one more lifetime while it is rendered again: 3 s,
    // so that a request on a loaded machine lands inside that window.
    let app = TestApp::with(Options::default().with(|c| c.page_cache_ms = 3_000)).await;
    let first = render_of(&shop_page(&app, None).await);
    // Past its lifetime (time passing is what is tested), well inside the next one.
    tokio::time::sleep(Duration::from_millis(3_200)).await;
    assert_eq!(render_of(&shop_page(&app, None).await), first, "no visitor waits for the new render");
    wait_until("a new render replaces the expired one", SOON, || async {
        render_of(&shop_page(&app, None).await) != first
    })
    .await;
    app.stop().await;
}

#[tokio::test]
async fn a_voucher_created_on_another_process_shows_on_this_ones_page() {
    let here = TestApp::with(Options::default().with(|c| c.page_cache_ms = 60_000)).await;
    let there = TestApp::with(here.restart_options().with(|c| c.page_cache_ms = 60_000)).await;
    let before = render_of(&shop_page(&here, None).await);
    new_voucher(&there, "Blender sale").await;
    wait_until("the sale event puts this process's page out of date", SOON, || async {
        shop_page(&here, None).await.contains("Blender sale")
    })
    .await;
    assert_ne!(render_of(&shop_page(&here, None).await), before);
    there.stop().await;
    here.stop().await;
}

/// An operator's change made through one process (a new title, a pause) shows on every
/// other process's shared page, kept for a minute otherwise, within moments: the
/// change's event, or else the sale-change count each process follows, dates the page.
#[tokio::test]
async fn a_sale_changed_on_another_process_shows_on_this_ones_page() {
    let here = TestApp::with(Options::default().with(|c| c.page_cache_ms = 60_000)).await;
    let there = TestApp::with(here.restart_options().with(|c| c.page_cache_ms = 60_000)).await;
    let v = new_voucher(&there, "Kettle sale").await;
    wait_until("the page lists it", SOON, || async { shop_page(&here, None).await.contains("Kettle sale") }).await;
    let body = serde_json::json!({ "voucher_id": v, "title": "Toaster sale" });
    there.api.admin("update_voucher", body).await.unwrap();
    there.api.admin("pause_sale", serde_json::json!({ "voucher_id": v })).await.unwrap();
    wait_until("the edit and the pause show here", SOON, || async {
        let page = shop_page(&here, None).await;
        page.contains("Toaster sale") && page.contains("Paused")
    })
    .await;
    there.stop().await;
    here.stop().await;
}

/// A page whose sales could not be loaded says so, answers the error's status and is
/// not shared: the next visitor gets the sales once the database answers again.
#[tokio::test]
async fn a_page_that_could_not_load_its_sales_is_not_shared() {
    let app = TestApp::with(Options::default().with(|c| c.page_cache_ms = 60_000)).await;
    new_voucher(&app, "Mixer sale").await;
    // The list's query fails (on SQLite and PostgreSQL alike) while the table is away.
    sqlx::query("ALTER TABLE vouchers RENAME TO vouchers_away").execute(&app.db).await.unwrap();
    let res = app.http.get(format!("{}/", app.base)).send().await.unwrap();
    let (status, page) = (res.status(), res.text().await.unwrap());
    assert!(status.is_server_error(), "the error's status, not 200: {status}");
    assert!(page.contains("role=\"alert\""), "the page says the sales could not be loaded");
    for internal in ["vouchers_away", "no such table", "does not exist"] {
        assert!(!page.contains(internal), "no internals on the page: {internal}");
    }
    sqlx::query("ALTER TABLE vouchers_away RENAME TO vouchers").execute(&app.db).await.unwrap();
    // Within the page's 60 s lifetime: a kept failed render would be served all of it.
    // Polled, not asked once: on a busy machine a render begun before the table came
    // back (a pooled connection's read still on the old schema) may fail once more.
    // What the last visit got is said if none gets the sales (a failing render's
    // cause is in the server's warnings).
    let deadline = std::time::Instant::now() + SOON;
    loop {
        let res = app.http.get(format!("{}/", app.base)).send().await.unwrap();
        let status = res.status();
        let page = res.text().await.unwrap();
        if status == 200 && page.contains("Mixer sale") {
            break;
        }
        let alert = page.split("role=\"alert\"").nth(1).map(|a| a.chars().take(200).collect::<String>());
        assert!(std::time::Instant::now() < deadline, "the failed render was kept: {status}, alert: {alert:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    app.stop().await;
}

/// A server whose pages could not hydrate does not start: built without its site's
/// settings (as `cargo test` builds it), started away from its site's files, or with a
/// site not built as deployed. It says why and exits before touching Redis or the
/// database.
#[tokio::test]
async fn a_server_without_its_site_refuses_to_start() {
    // Only a binary built without cargo-leptos (as `cargo test` builds it) lacks them.
    if option_env!("LEPTOS_OUTPUT_NAME").is_none() {
        let (status, said) = crate::support::process::run_to_exit(&[]).await;
        assert!(!status.success());
        assert!(said.contains("built without its site's settings") && said.contains("cargo leptos build"), "{said}");
    }

    let empty = tempfile::TempDir::new().unwrap();
    let root = empty.path().to_str().unwrap();
    let (status, said) =
        crate::support::process::run_to_exit(&[("LEPTOS_OUTPUT_NAME", "seckill"), ("LEPTOS_SITE_ROOT", root)]).await;
    assert!(!status.success());
    assert!(said.contains(&format!("{root}/pkg/seckill.js is missing")), "{said}");

    // Its files, but built by a plain `cargo leptos build` (not split): the page's
    // script would ask for a split loader that is not there.
    std::fs::create_dir_all(empty.path().join("pkg")).unwrap();
    for file in ["seckill.js", "seckill_bg.wasm", "seckill.css"] {
        std::fs::write(empty.path().join("pkg").join(file), b"").unwrap();
    }
    let (status, said) =
        crate::support::process::run_to_exit(&[("LEPTOS_OUTPUT_NAME", "seckill"), ("LEPTOS_SITE_ROOT", root)]).await;
    assert!(!status.success());
    assert!(said.contains("without `--split`") && said.contains("leptos watch --split"), "{said}");
}
