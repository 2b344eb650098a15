//! The `seckill` server: parse settings, then serve until Ctrl-C or SIGTERM (or run a
//! command instead: `seckill operator add NAME`).
//! Start-up order (Redis, database, migrations, warm-up, worker, HTTP) is in
//! [`seckill::server::serve`].

/// mimalloc: in a storm glibc's malloc took a large share of the server's CPU.
/// Built without transparent huge pages (`no_thp`): mimalloc returns idle memory to
/// the kernel, and each huge page touched again was zeroed whole, 2 MB at a time,
/// which cost CPU per grab and memory at the peak (figures: `src/bin/bench/history.md`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The runtime is single-threaded: it is the first of the server's serving threads,
/// and runs the background tasks besides (see `server::runtimes`).
fn main() -> std::process::ExitCode {
    match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime.block_on(run()),
        Err(e) => fail(format!("starting the runtime: {e}")),
    }
}

async fn run() -> std::process::ExitCode {
    use clap::Parser;
    use seckill::{config::Config, server};

    use tracing_subscriber::{layer::SubscriberExt, util::SubscriberInitExt, Layer};
    let levels = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,sqlx=warn".into());
    let logs = tracing_subscriber::fmt::layer().with_filter(levels).with_filter(seckill::server::ClientLogs);
    tracing_subscriber::registry().with(logs).init();
    let mut config = Config::parse();
    if let Some(command) = config.command.take() {
        return match server::cli::run(config, command).await {
            Ok(said) => {
                println!("{said}");
                std::process::ExitCode::SUCCESS
            }
            Err(e) => fail(e.to_string()),
        };
    }
    let leptos = match server::site::options() {
        Ok(options) => options,
        Err(e) => return fail(e),
    };
    let addr = config.site_addr.unwrap_or(leptos.site_addr);
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => return fail(format!("binding {addr}: {e}")),
    };
    match server::serve(config, leptos, listener, stop_signal()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => fail(e.to_string()),
    }
}

/// Ctrl-C, or SIGTERM (what process managers and orchestrators send).
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            eprintln!("seckill: cannot listen for SIGTERM ({e}); Ctrl-C still stops");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

fn fail(message: String) -> std::process::ExitCode {
    eprintln!("seckill: {message}");
    std::process::ExitCode::FAILURE
}
