//! The HTML shell and the routes: the top of the dependency graph (it imports the
//! pages; nothing imports it but the server and the hydrate entry).

use crate::pages::{admin::OperatorsPage, report::ReportPage, shop::ShopPage};
use leptos::prelude::*;
use leptos_meta::{provide_meta_context, Meta, Title};
use leptos_router::{
    components::{Route, Router, Routes, A},
    path, SsrMode,
};

/// The site's stylesheet as text (`server::site::stylesheet`), which the server
/// gives the shell in a release build: the shop page carries it inline. A phone on a
/// slow link then paints the shop, and its Grab works, a round trip sooner than with a
/// stylesheet it must ask for once the page is in (on a 400 ms link: 1.3 s, past the
/// second a shopper has at a sale's start). It costs the shop page 4 KB compressed,
/// which a browser keeping the stylesheet would not download again; the other pages,
/// an operator's, link it.
#[cfg(feature = "ssr")]
#[derive(Clone, Debug)]
pub struct ShopStylesheet(pub std::sync::Arc<str>);

/// The document around the app, rendered on the server. In islands mode: the browser
/// gets the page as HTML and hydrates only its islands (`#[island]`).
#[cfg(feature = "ssr")]
pub fn shell(options: LeptosOptions) -> impl IntoView {
    use leptos_meta::{HashedStylesheet, MetaTags};
    // The shop is the page at `/` (the first route below).
    let shop = use_context::<axum::http::request::Parts>().is_some_and(|request| request.uri.path() == "/");
    let stylesheet = match use_context::<ShopStylesheet>().filter(|_| shop) {
        Some(ShopStylesheet(css)) => view! { <style id="leptos" inner_html=css></style> }.into_any(),
        None => view! { <HashedStylesheet options=options.clone() id="leptos"/> }.into_any(),
    };
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                // Named, or the browser asks for /favicon.ico (a 404 page) on every first visit.
                <link rel="icon" type="image/svg+xml" href="/favicon.svg"/>
                <AutoReload options=options.clone()/>
                {stylesheet}
                <HydrationScripts options islands=true/>
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
    view! {
        <Title text="Seckill"/>
        // What search engines and link previews say of the site.
        <Meta name="description" content="Flash sales: vouchers on sale for a time window, first come, first served."/>
        <Router>
            <header class="bg-rose-600 text-white">
                <nav class="mx-auto flex max-w-5xl items-center gap-6 px-4 py-1 [&>a]:inline-flex [&>a]:min-h-11 [&>a]:min-w-11 [&>a]:items-center [&>a]:justify-center" aria-label="Main">
                    <span class="text-lg font-bold">"Seckill"</span>
                    <A href="/">"Shop"</A>
                    <A href="/admin">"Admin"</A>
                </nav>
            </header>
            <main class="mx-auto max-w-5xl px-4 py-6">
                <Routes fallback=|| view! { <p>"Page not found."</p> }>
                    // Whole pages in one write: their data is a few milliseconds
                    // away, and streaming them in pieces cost more than it saved.
                    <Route path=path!("/") view=ShopPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin") view=OperatorsPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/report/:id") view=ReportPage ssr=SsrMode::Async/>
                </Routes>
            </main>
        </Router>
        <Hydrated/>
    }
}

/// Marks the page once it is interactive (`data-hydrated` on `<body>`), so tests (and
/// slow links) know when buttons work. The page's last island: Leptos hydrates islands
/// in document order, waiting for each one's code, so this one runs after all others.
#[island]
fn Hydrated() -> impl IntoView {
    Effect::new(|_| {
        #[cfg(feature = "hydrate")]
        if let Some(body) = document().body() {
            let _ = body.set_attribute("data-hydrated", "true");
        }
    });
}
