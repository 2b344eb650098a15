//! The site the pages load: the hydration script, WASM and stylesheet that cargo-leptos
//! builds under the site root, and how long a browser may keep each answer.
//!
//! cargo-leptos compiles the site's settings into the server (`LEPTOS_OUTPUT_NAME` and
//! the rest; `LEPTOS_*` variables override them at run time). A server built without
//! them (a plain `cargo build`) serves pages that load `/pkg/.js`, and one started away
//! from its site answers 404 for the scripts: either way the page never hydrates and
//! no button works. [`options`] refuses to start then, naming what is missing.
//!
//! The files have content-hashed names (`hash-files`: `seckill.<hash>.wasm`, listed in
//! `hash.txt` beside the binary), and a brotli and a gzip copy each (`--precompress`),
//! which the file handler serves by `Accept-Encoding`. A hashed name never changes
//! content, so [`cache_policy`] lets browsers and shared caches keep it for a year;
//! pages and API answers carry a shopper's own data and cookies: no shared cache may
//! keep them.

use axum::http::{header, HeaderValue};
use leptos::config::LeptosOptions;
use std::path::PathBuf;

/// The site's settings, once the files a page loads are where it will ask for them.
pub fn options() -> Result<LeptosOptions, String> {
    if option_env!("LEPTOS_OUTPUT_NAME").is_none() && std::env::var_os("LEPTOS_OUTPUT_NAME").is_none() {
        return Err("this server was built without its site's settings: build it with \
                    `cargo leptos build --release` (a plain `cargo build` leaves them out)"
            .into());
    }
    let mut options =
        leptos::config::get_configuration(None).map_err(|e| format!("site settings: {e}"))?.leptos_options;
    // Built with hashed names: Leptos reads the setting at run time only.
    if std::env::var_os("LEPTOS_HASH_FILES").is_none() {
        options.hash_files = option_env!("LEPTOS_HASH_FILES") == Some("true");
    }
    if let Some(missing) = page_files(&options)?.into_iter().find(|file| !file.is_file()) {
        return Err(format!(
            "{} is missing, so pages would not work: build the site with `cargo leptos build \
             --release`, and start the server in the project's folder or set LEPTOS_SITE_ROOT",
            missing.display()
        ));
    }
    Ok(options)
}

/// The script, the WASM and the stylesheet a page loads, named the way Leptos names
/// them: with the hashes `hash.txt` lists, or `<name>_bg.wasm` in a server built
/// without cargo-leptos.
fn page_files(options: &LeptosOptions) -> Result<[PathBuf; 3], String> {
    let pkg = PathBuf::from(&*options.site_root).join(&*options.site_pkg_dir);
    let name = &*options.output_name;
    let named = |kind: &str, hashes: &str| {
        let hash = hashes.lines().filter_map(|l| l.split_once(':')).find(|(k, _)| k.trim() == kind);
        hash.map_or_else(|| name.to_owned(), |(_, h)| format!("{name}.{}", h.trim()))
    };
    if options.hash_files {
        let list = std::env::current_exe().map_err(|e| e.to_string())?.with_file_name(&*options.hash_file);
        let hashes = std::fs::read_to_string(&list).map_err(|e| {
            format!("{} ({e}): the hashed names of the site's files are listed there; build with `cargo leptos build --release`", list.display())
        })?;
        return Ok(["js", "wasm", "css"].map(|kind| pkg.join(format!("{}.{kind}", named(kind, &hashes)))));
    }
    let wasm = if option_env!("LEPTOS_OUTPUT_NAME").is_some() { name.to_owned() } else { format!("{name}_bg") };
    Ok([pkg.join(format!("{name}.js")), pkg.join(format!("{wasm}.wasm")), pkg.join(format!("{name}.css"))])
}

/// How long a browser or a shared cache may keep the answer to `path`, for answers
/// that do not say themselves: a hashed site file a year (its name changes with its
/// content), another site file until it changes (asked again each time, answered 304
/// while it has not), a page or an API answer by no shared cache (a shopper's own
/// data, a session cookie) and by the browser only to be asked again.
pub fn cache_policy(path: &str, pkg_route: &str) -> HeaderValue {
    if path.starts_with("/api/") {
        return HeaderValue::from_static("no-store");
    }
    match path.strip_prefix(pkg_route) {
        Some(file) if is_hashed(file) => HeaderValue::from_static("public, max-age=31536000, immutable"),
        Some(_) => HeaderValue::from_static("no-cache"),
        None if has_extension(path) => HeaderValue::from_static("no-cache"),
        None => HeaderValue::from_static("private, no-cache"),
    }
}

/// The header that says a stored answer differs by `Accept-Encoding` (site files come
/// as brotli, gzip or plain).
pub const VARY: (header::HeaderName, HeaderValue) = (header::VARY, HeaderValue::from_static("accept-encoding"));

/// `name.<hash>.ext`, the hash as cargo-leptos writes it: 22 characters of URL-safe
/// base64 (a split chunk's name too).
fn is_hashed(file: &str) -> bool {
    let mut parts = file.rsplitn(3, '.');
    let (_ext, hash, stem) = (parts.next(), parts.next(), parts.next());
    stem.is_some()
        && hash.is_some_and(|h| h.len() == 22 && h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
}

/// A file of the site root (`/favicon.ico`), not a page.
fn has_extension(path: &str) -> bool {
    path.rsplit('/').next().is_some_and(|last| last.contains('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_files_are_kept_a_year_and_pages_by_no_shared_cache() {
        let policy = |p: &str| cache_policy(p, "/pkg/").to_str().unwrap().to_owned();
        assert_eq!(policy("/pkg/seckill.AbCdEfGhIjKlMnOpQrStUv.wasm"), "public, max-age=31536000, immutable");
        assert_eq!(policy("/pkg/seckill.wasm"), "no-cache", "unhashed: asked again");
        assert_eq!(policy("/pkg/seckill.short.js"), "no-cache");
        assert_eq!(policy("/favicon.ico"), "no-cache");
        assert_eq!(policy("/"), "private, no-cache");
        assert_eq!(policy("/admin/report/7"), "private, no-cache");
        assert_eq!(policy("/api/grab"), "no-store");
        assert_eq!(policy("/api/orders.csv"), "no-store");
    }
}
