//! A list of vouchers that loads and refreshes, for the shop and the admin page (the
//! operator's form and rows are the sale's: `sale::operator_view`).

use super::Voucher;
use crate::error::AppError;
use leptos::prelude::*;

/// Each voucher of a list that loads and refreshes, drawn by `item`; says so while
/// loading (`None`), on error and (with `empty`) when there is none.
#[component]
pub fn EachVoucher<F>(
    vouchers: Signal<Option<Result<Vec<Voucher>, AppError>>>,
    /// Classes of the grid around the items.
    class: &'static str,
    /// What to say when the list is empty.
    empty: &'static str,
    item: F,
) -> impl IntoView
where
    F: Fn(Voucher) -> AnyView + Clone + Send + Sync + 'static,
{
    // Only the list's shape (loading, an error, none, some) redraws it: a refresh that
    // brings the same shape keeps every item drawn, with what it holds (a grab's
    // result, an open form); `For` adds and drops items by id.
    let shape = Memo::new(move |_| vouchers.get().map(|list| list.map(|l| l.is_empty())));
    move || {
        let item = item.clone();
        match shape.get() {
            None => view! { <p>"Loading…"</p> }.into_any(),
            Some(Err(e)) => {
                e.set_page_status();
                view! { <p role="alert">{e.message}</p> }.into_any()
            }
            Some(Ok(true)) => view! { <p>{empty}</p> }.into_any(),
            Some(Ok(false)) => view! {
                <div class=class>
                    <For each=move || vouchers.get().and_then(Result::ok).unwrap_or_default()
                        key=|v| v.id children=item/>
                </div>
            }
            .into_any(),
        }
    }
}
