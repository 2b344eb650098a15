//! The shopper's sign-in box and the operator's token form.

use super::{
    api::{admin_sign_in, sign_in, sign_out},
    User,
};
use leptos::prelude::*;

/// Shows who is signed in, or a form to sign in by name.
#[component]
pub fn SignInBox(user: RwSignal<Option<User>>) -> impl IntoView {
    let name = RwSignal::new(String::new());
    let sign_in = Action::new(|name: &String| sign_in(name.clone()));
    let sign_out = Action::new(|_: &()| sign_out());
    Effect::new(move |_| {
        if let Some(Ok(u)) = sign_in.value().get() {
            user.set(Some(u));
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(())) = sign_out.value().get() {
            user.set(None);
        }
    });
    let error = move || sign_in.value().get().and_then(Result::err).map(|e| e.message);
    view! {
        <section class="mb-6 rounded-lg bg-white p-4 shadow" aria-label="Account">
            <Show
                when=move || user.get().is_some()
                fallback=move || view! {
                    <form class="flex flex-wrap items-end gap-3" on:submit=move |ev| {
                        ev.prevent_default();
                        sign_in.dispatch(name.get_untracked());
                    }>
                        <label class="flex flex-col text-sm">
                            "Your name"
                            <input class="rounded border px-2 py-1" type="text" maxlength="32"
                                bind:value=name/>
                        </label>
                        <button class="rounded bg-rose-600 px-4 py-1 text-white" type="submit">"Sign in"</button>
                        <p role="alert" class="text-sm text-red-700">{error}</p>
                    </form>
                }
            >
                <p class="flex items-center gap-4">
                    <span>"Signed in as " <strong>{move || user.get().map(|u| u.name)}</strong></span>
                    <button class="rounded border px-3 py-1 text-sm" on:click=move |_| { sign_out.dispatch(()); }>
                        "Sign out"
                    </button>
                </p>
            </Show>
        </section>
    }
}

/// Asks for the admin token and exchanges it for an admin cookie.
#[component]
pub fn AdminUnlock(unlocked: RwSignal<bool>) -> impl IntoView {
    let token = RwSignal::new(String::new());
    let unlock = Action::new(|t: &String| admin_sign_in(t.clone()));
    Effect::new(move |_| {
        if let Some(Ok(())) = unlock.value().get() {
            unlocked.set(true);
        }
    });
    view! {
        <form class="flex flex-wrap items-end gap-3 rounded-lg bg-white p-4 shadow" on:submit=move |ev| {
            ev.prevent_default();
            unlock.dispatch(token.get_untracked());
        }>
            <label class="flex flex-col text-sm">
                "Admin token"
                <input class="rounded border px-2 py-1" type="password" bind:value=token/>
            </label>
            <button class="rounded bg-slate-800 px-4 py-1 text-white" type="submit">"Unlock"</button>
            <p role="alert" class="text-sm text-red-700">
                {move || unlock.value().get().and_then(Result::err).map(|e| e.message)}
            </p>
        </form>
    }
}
