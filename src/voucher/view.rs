//! A list of vouchers that loads and refreshes, for the shop and the admin page (the
//! operator's form and rows are the sale's: `sale::admin_view`).

use super::Voucher;
use crate::error::AppError;
use leptos::prelude::*;

/// Each voucher of a list that loads and refreshes, drawn by `item`; says so while
/// loading, on error and (with `empty`) when there is none.
#[component]
pub fn EachVoucher<F>(
    vouchers: Resource<Result<Vec<Voucher>, AppError>>,
    /// Classes of the grid around the items.
    class: &'static str,
    /// What to say when the list is empty.
    empty: &'static str,
    item: F,
) -> impl IntoView
where
    F: Fn(Voucher) -> AnyView + Clone + Send + Sync + 'static,
{
    view! {
        <Transition fallback=|| view! { <p>"Loading…"</p> }>
            {move || {
                let item = item.clone();
                vouchers.get().map(move |list| match list {
                    Err(e) => {
                        e.set_page_status();
                        view! { <p role="alert">{e.message}</p> }.into_any()
                    }
                    Ok(list) if list.is_empty() => view! { <p>{empty}</p> }.into_any(),
                    Ok(list) => view! {
                        <div class=class>
                            <For each=move || list.clone() key=|v| v.id children=item/>
                        </div>
                    }.into_any(),
                })
            }}
        </Transition>
    }
    .into_any()
}
