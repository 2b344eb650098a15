//! The HTML shell and the routes.

use crate::{sale::view::ShopPage, voucher::view::AdminPage};
use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::{
    components::{Route, Router, Routes, A},
    path,
};

/// The document around the app, rendered on the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <AutoReload options=options.clone()/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body class="min-h-screen bg-slate-50 text-slate-900">
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    // Marks the page once it is interactive, so tests (and slow links) know when
    // buttons work.
    Effect::new(|_| {
        #[cfg(feature = "hydrate")]
        if let Some(body) = document().body() {
            let _ = body.set_attribute("data-hydrated", "true");
        }
    });
    view! {
        <Stylesheet id="leptos" href="/pkg/seckill.css"/>
        <Title text="Seckill"/>
        <Router>
            <header class="bg-rose-600 text-white">
                <nav class="mx-auto flex max-w-5xl items-center gap-6 px-4 py-3" aria-label="Main">
                    <span class="text-lg font-bold">"Seckill"</span>
                    <A href="/">"Shop"</A>
                    <A href="/admin">"Admin"</A>
                </nav>
            </header>
            <main class="mx-auto max-w-5xl px-4 py-6">
                <Routes fallback=|| view! { <p>"Page not found."</p> }>
                    <Route path=path!("/") view=ShopPage/>
                    <Route path=path!("/admin") view=AdminPage/>
                </Routes>
            </main>
        </Router>
    }
}

/// Calls `f` every `ms` milliseconds in the browser (never on the server), until
/// the calling component is dropped.
pub fn every(ms: u64, f: impl Fn() + 'static) {
    #[cfg(feature = "hydrate")]
    {
        if let Ok(handle) = set_interval_with_handle(f, std::time::Duration::from_millis(ms)) {
            on_cleanup(move || handle.clear());
        }
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (ms, f);
}

/// Waits `ms` milliseconds in the browser; returns at once on the server.
pub async fn pause(ms: u32) {
    #[cfg(feature = "hydrate")]
    gloo_timers::future::TimeoutFuture::new(ms).await;
    #[cfg(not(feature = "hydrate"))]
    let _ = ms;
}
