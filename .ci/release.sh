# Sourced by .ci/test and .ci/bench: `build_release` builds what users deploy, the
# release server and its site (WASM, JS, CSS), through cargo-leptos, and the load tool
# and the chaos run's tool in the same cargo run. cargo-leptos compiles the site's settings into the server (a
# plain `cargo build` leaves them out, and its server refuses to start); building the
# load tool in the same run keeps one set of settings, so neither build undoes the
# other's and the server Playwright tests is the one the bench measures. `--precompress`
# writes a brotli and a gzip copy beside each site file, served by Accept-Encoding;
# `--split` puts the operator's pages (lazy routes, `app.rs`) in WASM files of their own.
# Built without clippy as the compiler (.ci/engines builds the tests with it): the
# release build is the longest step of a clean checkout's `npm test`, and its code is
# linted in the tests' build.
# The tools are named as arguments, both by default (`bench chaos`); `npm test` needs only
# the chaos tool (the load tool is linted and tested in the tests' build), and a later
# build of both compiles only the missing one.
build_release() {
  local tools=("$@")
  ((${#tools[@]})) || tools=(bench chaos)
  env -u RUSTC_WORKSPACE_WRAPPER cargo leptos build --release --precompress --split --cargo-locked \
    "${tools[@]/#/--bin-cargo-args=--bin=}"
}
