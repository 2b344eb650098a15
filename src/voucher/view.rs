//! A list of vouchers that loads and refreshes, for the admin page (the operator's
//! form and rows are the sale's: `sale::operator_view`; the shop's cards are drawn by
//! the server and painted in place: `pages::shop`).

use super::Voucher;
use crate::error::AppError;
use leptos::{either::EitherOf4, prelude::*};

/// Each voucher of a list that loads and refreshes, drawn by `item`; says so while
/// loading (`None`), on error and (with `empty`) when there is none.
#[component]
pub fn EachVoucher<F, V>(
    vouchers: Signal<Option<Result<Vec<Voucher>, AppError>>>,
    /// Classes of the grid around the items.
    class: &'static str,
    /// What to say when the list is empty.
    empty: &'static str,
    item: F,
) -> impl IntoView
where
    F: Fn(Voucher) -> V + Clone + Send + Sync + 'static,
    V: IntoView + 'static,
{
    // Only the list's shape (loading, an error, none, some) redraws it: a refresh that
    // brings the same shape keeps every item drawn, with what it holds (a grab's
    // result, an open form); `For` adds and drops items by id.
    let shape = Memo::new(move |_| vouchers.get().map(|list| list.map(|l| l.is_empty())));
    move || {
        let item = item.clone();
        match shape.get() {
            None => EitherOf4::A(view! { <p>"Loading…"</p> }),
            Some(Err(e)) => {
                e.set_page_status();
                EitherOf4::B(view! { <p role="alert">{e.message}</p> })
            }
            Some(Ok(true)) => EitherOf4::C(view! { <p>{empty}</p> }),
            Some(Ok(false)) => EitherOf4::D(view! {
                <div class=class>
                    <For each=move || vouchers.get().and_then(Result::ok).unwrap_or_default()
                        key=|v| v.id children=item/>
                </div>
            }),
        }
    }
}
