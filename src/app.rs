//! The HTML shell and the routes: the top of the dependency graph (it imports the
//! pages; nothing imports it but the server and the hydrate entry).

use crate::pages::{admin::OperatorsPage, report::ReportPage, shop::ShopPage};
use leptos::prelude::*;
use leptos_meta::{provide_meta_context, Title};
use leptos_router::{
    components::{Route, Router, Routes, A},
    lazy_route, path, Lazy, LazyRoute, SsrMode,
};

/// The document around the app, rendered on the server.
#[cfg(feature = "ssr")]
pub fn shell(options: LeptosOptions) -> impl IntoView {
    use leptos_meta::{HashedStylesheet, MetaTags};
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                // Named, or the browser asks for /favicon.ico (a 404 page) on every first visit.
                <link rel="icon" type="image/svg+xml" href="/favicon.svg"/>
                <AutoReload options=options.clone()/>
                <HashedStylesheet options=options.clone() id="leptos"/>
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
        <Title text="Seckill"/>
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
                    <Route path=path!("/admin") view={Lazy::<OperatorsRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/report/:id") view={Lazy::<ReportRoute>::new()} ssr=SsrMode::Async/>
                </Routes>
            </main>
        </Router>
    }
}

/// The operator's pages are routes of their own in the browser's code (`--split`): a
/// shopper's first load is the shop's code alone, and an operator's browser fetches
/// the rest when it opens one of them.
struct OperatorsRoute;

#[lazy_route]
impl LazyRoute for OperatorsRoute {
    fn data() -> Self {
        Self
    }

    fn view(_this: Self) -> AnyView {
        view! { <OperatorsPage/> }.into_any()
    }
}

/// A sale's report (see [`OperatorsRoute`]).
struct ReportRoute;

#[lazy_route]
impl LazyRoute for ReportRoute {
    fn data() -> Self {
        Self
    }

    fn view(_this: Self) -> AnyView {
        view! { <ReportPage/> }.into_any()
    }
}
