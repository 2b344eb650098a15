//! The site the pages load: the hydration script, WASM and stylesheet that cargo-leptos
//! builds under the site root, and how long a browser may keep each answer.
//!
//! cargo-leptos compiles the site's settings into the server (`LEPTOS_OUTPUT_NAME` and
//! the rest; `LEPTOS_*` variables override them at run time). A server built without
//! them (a plain `cargo build`) serves pages that load `/pkg/.js`, and one started away
//! from its site answers 404 for the scripts: either way the page never hydrates and
//! no button works. [`options`] refuses to start then, naming what is missing; and
//! also when the site was not built as deployed (`--split`, `--precompress`: a plain
//! `cargo leptos build --release` builds a site whose pages never hydrate).
//!
//! The files have content-hashed names (`hash-files`: `seckill.<hash>.wasm`, listed in
//! `hash.txt` beside the binary), and a brotli and a gzip copy each (`--precompress`),
//! which the file handler serves by `Accept-Encoding`. A hashed name never changes
//! content, so [`cache_policy`] lets browsers and shared caches keep it for a year;
//! pages and API answers carry a shopper's own data and cookies: no shared cache may
//! keep them.

use axum::http::{header, HeaderValue};
use leptos::config::LeptosOptions;
use std::path::{Path, PathBuf};

/// The site's settings, once the files a page loads are where it will ask for them.
pub fn options() -> Result<LeptosOptions, String> {
    if option_env!("LEPTOS_OUTPUT_NAME").is_none() && std::env::var_os("LEPTOS_OUTPUT_NAME").is_none() {
        return Err(format!(
            "this server was built without its site's settings: build it with `{DEPLOY_BUILD}` (a plain \
             `cargo build` leaves them out)"
        ));
    }
    let mut options =
        leptos::config::get_configuration(None).map_err(|e| format!("site settings: {e}"))?.leptos_options;
    // Built with hashed names: Leptos reads the setting at run time only.
    if std::env::var_os("LEPTOS_HASH_FILES").is_none() {
        options.hash_files = option_env!("LEPTOS_HASH_FILES") == Some("true");
    }
    let (files, hashes) = page_files(&options)?;
    if let Some(missing) = files.iter().find(|file| !file.is_file()) {
        return Err(format!(
            "{} is missing, so pages would not work: build the site with `{DEPLOY_BUILD}`, and \
             start the server in the project's folder or set LEPTOS_SITE_ROOT",
            missing.display()
        ));
    }
    let pkg = PathBuf::from(&*options.site_root).join(&*options.site_pkg_dir);
    check_build(&pkg, hashes.as_deref(), &files, !cfg!(debug_assertions))?;
    Ok(options)
}

/// The text of the site's stylesheet, for the shop page to carry inline
/// (`app::ShopStylesheet`), in a release build (a development build keeps the link:
/// `cargo leptos watch` swaps it when the stylesheet changes). `None` when it cannot
/// be read, or could close the element it would sit in: the page then links it.
pub fn stylesheet(options: &LeptosOptions) -> Option<std::sync::Arc<str>> {
    if cfg!(debug_assertions) {
        return None;
    }
    let ([_, _, css], _) = page_files(options).ok()?;
    match std::fs::read_to_string(&css) {
        Ok(text) if !text.contains("</") => Some(text.into()),
        Ok(_) => {
            tracing::warn!("{} holds `</`: the shop page links it instead of carrying it", css.display());
            None
        }
        Err(e) => {
            tracing::warn!("{} ({e}): the shop page links it instead of carrying it", css.display());
            None
        }
    }
}

/// How the site is built to be deployed: cargo-leptos's flags that a plain `cargo leptos
/// build --release` leaves out are what [`check_build`] asks for.
const DEPLOY_BUILD: &str = "cargo leptos build --release --precompress --split";
/// And while developing (what `npm start` runs).
const DEV_BUILD: &str = "cargo leptos watch --split";

/// The site was built the way this server serves it: split (`--split`: the code of the
/// lazy pages and functions in WASM files of their own; without it the page's script
/// asks for a split loader that is not there, and no page hydrates: nothing says so but
/// the browser's console), and, for a release server, precompressed (`--precompress`:
/// a phone's first load is the brotli copies' size; without them it is four times
/// that). `hashes` is `hash.txt` (none when names are not hashed).
fn check_build(pkg: &Path, hashes: Option<&str>, files: &[PathBuf], release: bool) -> Result<(), String> {
    let split = match hashes {
        Some(list) => list.lines().filter_map(|l| l.split_once(':')).any(|(kind, _)| kind.trim() == "split"),
        None => pkg.join("__wasm_split_manifest.json").is_file(),
    };
    if !split {
        let build = if release { DEPLOY_BUILD } else { DEV_BUILD };
        return Err(format!(
            "the site was built without `--split`, so its pages would never hydrate: build it with `{build}`"
        ));
    }
    let brotli =
        |file: &PathBuf| file.with_file_name(format!("{}.br", file.file_name().unwrap_or_default().to_string_lossy()));
    if let Some(plain) = files.iter().find(|file| release && !brotli(file).is_file()) {
        return Err(format!(
            "{} has no brotli copy: the site was built without `--precompress`, and a phone would load four \
             times its size: build it with `{DEPLOY_BUILD}`",
            plain.display()
        ));
    }
    Ok(())
}

/// The script, the WASM and the stylesheet a page loads, named the way Leptos names
/// them: with the hashes `hash.txt` lists, or `<name>_bg.wasm` in a server built
/// without cargo-leptos.
/// With them, the list of hashed names (`hash.txt`), when names are hashed.
fn page_files(options: &LeptosOptions) -> Result<([PathBuf; 3], Option<String>), String> {
    let pkg = PathBuf::from(&*options.site_root).join(&*options.site_pkg_dir);
    let name = &*options.output_name;
    let named = |kind: &str, hashes: &str| {
        let hash = hashes.lines().filter_map(|l| l.split_once(':')).find(|(k, _)| k.trim() == kind);
        hash.map_or_else(|| name.to_owned(), |(_, h)| format!("{name}.{}", h.trim()))
    };
    if options.hash_files {
        let list = std::env::current_exe().map_err(|e| e.to_string())?.with_file_name(&*options.hash_file);
        let hashes = std::fs::read_to_string(&list).map_err(|e| {
            format!(
                "{} ({e}): the hashed names of the site's files are listed there; build with `{DEPLOY_BUILD}`",
                list.display()
            )
        })?;
        let files = ["js", "wasm", "css"].map(|kind| pkg.join(format!("{}.{kind}", named(kind, &hashes))));
        return Ok((files, Some(hashes)));
    }
    let wasm = if option_env!("LEPTOS_OUTPUT_NAME").is_some() { name.to_owned() } else { format!("{name}_bg") };
    Ok(([pkg.join(format!("{name}.js")), pkg.join(format!("{wasm}.wasm")), pkg.join(format!("{name}.css"))], None))
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

    /// A site built by a plain `cargo leptos build --release` (no split, no brotli
    /// copies) is refused, naming the flags; the deploy build's site is served.
    #[test]
    fn a_site_built_without_the_deploy_flags_is_refused_naming_them() {
        let dir = tempfile::TempDir::new().unwrap();
        let files = ["seckill.a.js", "seckill.b.wasm", "seckill.c.css"].map(|f| dir.path().join(f));
        for file in &files {
            std::fs::write(file, "x").unwrap();
        }
        let plain = "js: a\nwasm: b\ncss: c\n";
        let split = "js: a\nwasm: b\ncss: c\nmanifest: d\nsplit: e\n";
        let refused = check_build(dir.path(), Some(plain), &files, true).unwrap_err();
        assert!(refused.contains("--split") && refused.contains(DEPLOY_BUILD), "{refused}");
        let refused = check_build(dir.path(), Some(split), &files, true).unwrap_err();
        assert!(refused.contains("--precompress") && refused.contains(DEPLOY_BUILD), "{refused}");
        // `npm start`'s debug build is not precompressed, and needs not be.
        assert_eq!(check_build(dir.path(), Some(split), &files, false), Ok(()));
        assert!(check_build(dir.path(), Some(plain), &files, false).unwrap_err().contains(DEV_BUILD));
        for file in &files {
            std::fs::write(format!("{}.br", file.display()), "x").unwrap();
        }
        assert_eq!(check_build(dir.path(), Some(split), &files, true), Ok(()));
        // Unhashed names: the split manifest under its own name.
        assert!(check_build(dir.path(), None, &files, true).unwrap_err().contains("--split"));
        std::fs::write(dir.path().join("__wasm_split_manifest.json"), "{}").unwrap();
        assert_eq!(check_build(dir.path(), None, &files, true), Ok(()));
    }
}
