//! The operators' forms: their sign-in door, the admin token's, and the list of
//! operators with an admin's changes. The shopper's account box is `account_box`.

use super::{
    operator_api::{
        add_operator, admin_sign_in, list_operators, operator_me, operator_sign_in, remove_operator, set_operator_role,
    },
    ListedOperator, Role,
};
use leptos::prelude::*;

/// The classes of a form's text field and of its label.
pub const INPUT: &str = "min-h-11 rounded border px-2 py-1";
pub const FIELD: &str = "flex flex-col text-sm";

/// The operators' page's door: an operator signs in by name and password; the admin
/// token (bootstrap, automation) opens it too.
#[component]
pub fn OperatorsDoor(unlocked: RwSignal<bool>) -> impl IntoView {
    let name = RwSignal::new(String::new());
    let password = RwSignal::new(String::new());
    let sign_in = Action::new(|(n, p): &(String, String)| operator_sign_in(n.clone(), p.clone()));
    Effect::new(move |_| {
        if let Some(Ok(_)) = sign_in.value().get() {
            unlocked.set(true);
        }
    });
    view! {
        <form class="mb-4 flex flex-wrap items-end gap-3 rounded-lg bg-white p-4 shadow" aria-label="Operator sign-in"
            on:submit=move |ev| {
                ev.prevent_default();
                sign_in.dispatch((name.get_untracked(), password.get_untracked()));
            }>
            <label class=FIELD>
                "Operator name"
                <input class=INPUT type="text" maxlength="32" autocomplete="username" required bind:value=name/>
            </label>
            <label class=FIELD>
                "Operator password"
                <input class=INPUT type="password" maxlength="128" autocomplete="current-password" required
                    bind:value=password/>
            </label>
            <button class="rounded bg-slate-800 px-4 min-h-11 min-w-11 py-1 text-white" type="submit">"Sign in"</button>
            <p role="alert" class="text-sm text-red-700">
                {move || sign_in.value().get().and_then(Result::err).map(|e| e.message)}
            </p>
        </form>
        <TokenUnlock unlocked/>
    }
}

/// Who runs this admin page, and (for admins) the form that adds an operator.
#[component]
pub fn OperatorPanel() -> impl IntoView {
    let me = Resource::new(|| (), |_| operator_me());
    let who = move || me.get().and_then(Result::ok).and_then(|m| m.operator);
    let is_admin = move || who().is_some_and(|o| o.role == Role::Admin);
    view! {
        <p class="mb-4 text-sm">
            {move || who().map(|o| format!("Signed in as {} ({})", o.name, o.role.as_str()))}
        </p>
        <Show when=is_admin>
            <AddOperator/>
        </Show>
    }
}

/// Every operator with their role and last sign-in; an admin changes a role or removes
/// one (each takes effect on every process within a second).
#[component]
fn OperatorList(refresh: RwSignal<u64>) -> impl IntoView {
    let listed = Resource::new(move || refresh.get(), |_| list_operators());
    // `None`: remove the operator; `Some(role)`: give them that role. What was done, said.
    let change = Action::new(|(name, role): &(String, Option<Role>)| {
        let (name, role) = (name.clone(), *role);
        async move {
            match role {
                Some(role) => {
                    set_operator_role(name, role).await.map(|o| format!("{} is now {}.", o.name, o.role.as_str()))
                }
                None => remove_operator(name.clone()).await.map(|()| format!("Removed {name}.")),
            }
        }
    });
    Effect::new(move |_| {
        if change.value().get().is_some() {
            refresh.update(|n| *n += 1);
        }
    });
    let rows = move || {
        listed.get().map(|answer| match answer {
            Ok(list) => list.into_iter().map(|o| operator_row(o, change)).collect_view().into_any(),
            Err(e) => view! { <tr><td colspan="4">{e.message}</td></tr> }.into_any(),
        })
    };
    view! {
        <table class="mt-4 w-full text-left text-sm" aria-label="Operators">
            <thead><tr><th>"Name"</th><th>"Role"</th><th>"Last sign-in"</th><th></th></tr></thead>
            <tbody><Transition>{rows}</Transition></tbody>
        </table>
        <p role="status" aria-label="Operator changes">{move || change.value().get().and_then(Result::ok)}</p>
        <p role="alert" class="text-sm text-red-700">{move || change.value().get().and_then(Result::err).map(|e| e.message)}</p>
    }
}

/// One operator's row, with the admin's two buttons.
fn operator_row(
    o: ListedOperator,
    change: Action<(String, Option<Role>), Result<String, crate::error::AppError>>,
) -> impl IntoView {
    let other = if o.role == Role::Admin { Role::Operator } else { Role::Admin };
    let last = o.last_sign_in_at.and_then(chrono::DateTime::from_timestamp_millis);
    let last = last.map_or_else(|| "never".to_owned(), |t| t.format("%Y-%m-%d %H:%M UTC").to_string());
    let (for_role, for_removal) = (o.name.clone(), o.name.clone());
    view! {
        <tr class="border-t">
            <td>{o.name.clone()}</td>
            <td>{o.role.as_str()}</td>
            <td>{last}</td>
            <td class="flex flex-wrap gap-2 py-1">
                <button class="rounded border px-3 min-h-11 min-w-11" aria-label=format!("Make {} {}", o.name, other.as_str())
                    on:click=move |_| { change.dispatch((for_role.clone(), Some(other))); }>
                    {format!("Make {}", other.as_str())}
                </button>
                <button class="rounded border px-3 min-h-11 min-w-11 text-red-700" aria-label=format!("Remove {}", o.name)
                    on:click=move |_| { change.dispatch((for_removal.clone(), None)); }>
                    "Remove"
                </button>
            </td>
        </tr>
    }
}

/// Adds an operator (admins), above the list of operators.
#[component]
fn AddOperator() -> impl IntoView {
    let name = RwSignal::new(String::new());
    let password = RwSignal::new(String::new());
    let admin = RwSignal::new(false);
    let add = Action::new(|(n, p, admin): &(String, String, bool)| {
        add_operator(n.clone(), p.clone(), if *admin { Role::Admin } else { Role::Operator })
    });
    let refresh = RwSignal::new(0u64);
    Effect::new(move |_| {
        if let Some(Ok(_)) = add.value().get() {
            refresh.update(|n| *n += 1);
        }
    });
    let said = move || match add.value().get() {
        Some(Ok(o)) => Some(format!("Added {} ({})", o.name, o.role.as_str())),
        Some(Err(e)) => Some(e.message),
        None => None,
    };
    view! {
        <details class="mb-4 rounded-lg bg-white p-4 shadow">
            <summary class="cursor-pointer font-semibold">"Operators"</summary>
            <form class="mt-2 flex flex-wrap items-end gap-3" aria-label="Add operator" on:submit=move |ev| {
                ev.prevent_default();
                add.dispatch((name.get_untracked(), password.get_untracked(), admin.get_untracked()));
            }>
                <label class=FIELD>
                    "New operator's name"
                    <input class=INPUT type="text" maxlength="32" autocomplete="off" required bind:value=name/>
                </label>
                <label class=FIELD>
                    "Their password"
                    <input class=INPUT type="password" maxlength="128" autocomplete="new-password" required
                        bind:value=password/>
                </label>
                <label class="flex items-center gap-1 text-sm">
                    <input type="checkbox" bind:checked=admin/>
                    "Admin (may add operators)"
                </label>
                <button class="rounded border px-3 min-h-11 min-w-11 py-1" type="submit">"Add operator"</button>
                <p role="status">{said}</p>
            </form>
            <OperatorList refresh/>
        </details>
    }
}

/// Asks for the admin token and exchanges it for an operator cookie.
#[component]
fn TokenUnlock(unlocked: RwSignal<bool>) -> impl IntoView {
    let token = RwSignal::new(String::new());
    let unlock = Action::new(|t: &String| admin_sign_in(t.clone()));
    Effect::new(move |_| {
        if let Some(Ok(())) = unlock.value().get() {
            unlocked.set(true);
        }
    });
    view! {
        <form class="flex flex-wrap items-end gap-3 rounded-lg bg-white p-4 shadow" aria-label="Unlock with the admin token"
            on:submit=move |ev| {
                ev.prevent_default();
                unlock.dispatch(token.get_untracked());
            }>
            <label class="flex flex-col text-sm">
                "Admin token"
                <input class="rounded border px-2 py-1" type="password" bind:value=token/>
            </label>
            <button class="rounded bg-slate-800 px-4 min-h-11 min-w-11 py-1 text-white" type="submit">"Unlock"</button>
            <p role="alert" class="text-sm text-red-700">
                {move || unlock.value().get().and_then(Result::err).map(|e| e.message)}
            </p>
        </form>
    }
}
