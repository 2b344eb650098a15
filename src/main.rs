//! The `seckill` server: parse settings, then serve until Ctrl-C.
//! Start-up order (Redis, database, migrations, warm-up, worker, HTTP) is in
//! [`seckill::server::serve`].

#[tokio::main]
async fn main() -> std::process::ExitCode {
    use clap::Parser;
    use seckill::{config::Config, server};

    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .init();
    let config = Config::parse();
    let leptos = match leptos::config::get_configuration(None) {
        Ok(conf) => conf.leptos_options,
        Err(e) => return fail(format!("reading Leptos settings: {e}")),
    };
    let addr = config.site_addr.unwrap_or(leptos.site_addr);
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => return fail(format!("binding {addr}: {e}")),
    };
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match server::serve(config, leptos, listener, shutdown).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => fail(e.to_string()),
    }
}

fn fail(message: String) -> std::process::ExitCode {
    eprintln!("seckill: {message}");
    std::process::ExitCode::FAILURE
}
