//! The site the pages load: the hydration script and WASM that cargo-leptos builds
//! under the site root. cargo-leptos also compiles the site's settings into the server
//! (`LEPTOS_OUTPUT_NAME` and the rest; `LEPTOS_*` variables override them at run
//! time). A server built without them (a plain `cargo build`) serves pages that load
//! `/pkg/.js`, and one started away from its site answers 404 for the scripts: either
//! way the page never hydrates and no button works. [`options`] refuses to start then,
//! naming what is missing.

use leptos::config::LeptosOptions;
use std::path::PathBuf;

/// The site's settings, once the files a page loads are where it will ask for them.
pub fn options() -> Result<LeptosOptions, String> {
    if option_env!("LEPTOS_OUTPUT_NAME").is_none() && std::env::var_os("LEPTOS_OUTPUT_NAME").is_none() {
        return Err("this server was built without its site's settings: build it with \
                    `cargo leptos build --release` (a plain `cargo build` leaves them out)"
            .into());
    }
    let options = leptos::config::get_configuration(None).map_err(|e| format!("site settings: {e}"))?.leptos_options;
    // Hashed names are listed in a file beside the binary; they are not checked here.
    if !options.hash_files {
        if let Some(missing) = page_files(&options).into_iter().find(|file| !file.is_file()) {
            return Err(format!(
                "{} is missing, so pages would not work: build the site with `cargo leptos build \
                 --release`, and start the server in the project's folder or set LEPTOS_SITE_ROOT",
                missing.display()
            ));
        }
    }
    Ok(options)
}

/// The script and the WASM a page loads, named the way Leptos's `HydrationScripts`
/// names them: the WASM is `<name>_bg.wasm` in a server built without cargo-leptos.
fn page_files(options: &LeptosOptions) -> [PathBuf; 2] {
    let pkg = PathBuf::from(&*options.site_root).join(&*options.site_pkg_dir);
    let name = &*options.output_name;
    let wasm = if option_env!("LEPTOS_OUTPUT_NAME").is_some() { name.to_owned() } else { format!("{name}_bg") };
    [pkg.join(format!("{name}.js")), pkg.join(format!("{wasm}.wasm"))]
}
