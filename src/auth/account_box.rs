//! The shopper's account box on the shop page: sign in, create an account, and (in WASM
//! of its own, once signed in) who is signed in, Sign out, change the password, sign out
//! everywhere. The server draws the signed-out box ([`SignInBox`]); the browser answers
//! it ([`follow_sign_in`]) without drawing it again.

use super::view::{FIELD, INPUT};
#[cfg(feature = "hydrate")]
use super::{
    api::{change_password, sign_out, sign_out_everywhere, sign_up, sign_up_challenge, SignIn},
    User,
};
#[cfg(feature = "hydrate")]
use crate::error::{AppResult, ErrorCode};
use leptos::prelude::*;
#[cfg(feature = "hydrate")]
use leptos::server_fn::ServerFn;

/// The id of the shop's account box.
const ACCOUNT_ID: &str = "account";

/// The box's parts the browser reads and changes (`data-part`).
mod part {
    pub const FORM: &str = "sign-in";
    pub const NAME: &str = "name";
    pub const PASSWORD: &str = "password";
    pub const SUBMIT: &str = "submit";
    pub const SWITCH: &str = "switch";
    pub const ERROR: &str = "error";
    pub const MENU: &str = "menu";
}

/// What the sign-in form says: to sign in, or (after "New here?") to create an account.
struct Words {
    /// The form's name; the password's `autocomplete` (for password managers); the
    /// submit button; the button that switches to the other.
    form: &'static str,
    password: &'static str,
    submit: &'static str,
    switch: &'static str,
}

const SIGN_IN: Words =
    Words { form: "Sign in", password: "current-password", submit: "Sign in", switch: "New here? Create an account" };

#[cfg_attr(not(feature = "hydrate"), expect(dead_code, reason = "the browser switches the form"))]
const NEW_ACCOUNT: Words = Words {
    form: "Create an account",
    password: "new-password",
    submit: "Create account",
    switch: "I have an account",
};

/// The shop's account box as the server draws it: the form to sign in (or to create an
/// account) and an empty place for the account menu. Who is signed in is the browser's
/// to find (`pages::shop`): the server's page is then the same for every visitor. In
/// the browser, [`follow_sign_in`] answers the form and shows the menu.
#[component]
pub fn SignInBox() -> impl IntoView {
    let Words { form, password, submit, switch } = SIGN_IN;
    view! {
        <section class="mb-6 rounded-lg bg-white p-4 shadow" aria-label="Account" id=ACCOUNT_ID>
            <form class="flex flex-wrap items-end gap-3" aria-label=form data-part=part::FORM>
                <label class=FIELD>
                    "Your name"
                    <input class=INPUT type="text" maxlength="32" autocomplete="username" required data-part=part::NAME/>
                </label>
                <label class=FIELD>
                    "Password"
                    <input class=INPUT type="password" maxlength="128" required autocomplete=password data-part=part::PASSWORD/>
                </label>
                <button class="rounded bg-rose-600 px-4 min-h-11 min-w-11 py-1 text-white" type="submit" data-part=part::SUBMIT>
                    {submit}
                </button>
                <button class="min-h-11 text-sm underline" type="button" data-part=part::SWITCH>{switch}</button>
                <p role="alert" class="text-sm text-red-700" data-part=part::ERROR></p>
            </form>
            <div data-part=part::MENU></div>
        </section>
    }
}

/// The account box in the browser: its form signs in (or creates an account) and sets
/// `user`; while someone is signed in the form hides and the account menu shows in its
/// place, drawn anew for each sign-in. `None` when the page has no account box.
#[cfg(feature = "hydrate")]
pub fn follow_sign_in(user: RwSignal<Option<User>>) -> Option<()> {
    use crate::browser::dom::{on, set_flag};
    use std::rc::Rc;
    use wasm_bindgen::JsCast;

    let section = document().get_element_by_id(ACCOUNT_ID)?;
    let form = Rc::new(form::SignInForm::find(&section)?);
    let switched = form.clone();
    on(&form.switch, "click", move |_| switched.show(!switched.new_account.get())).forget();
    let submitted = form.clone();
    on(&form.form, "submit", move |ev| {
        ev.prevent_default();
        submitted.clone().submit(user);
    })
    .forget();
    let menu = crate::browser::dom::part(&section, part::MENU)?.dyn_into::<web_sys::HtmlElement>().ok()?;
    crate::browser::while_some(user, menu, account_menu, move |signed_in| {
        // Hidden while someone is signed in, and as new when it shows again (what
        // was typed before the island arrived is kept).
        set_flag(&form.form, "hidden", signed_in);
        if signed_in {
            form.clear();
        }
    });
    Some(())
}

#[cfg(feature = "hydrate")]
mod form {
    use super::{create_account, part, sign_in, User, Words, NEW_ACCOUNT, SIGN_IN};
    use crate::browser::dom::{self, set_attr, set_text};
    use leptos::prelude::*;
    use std::{cell::Cell, rc::Rc};
    use wasm_bindgen::JsCast;
    use web_sys::{Element, HtmlInputElement};

    /// The sign-in form as the server drew it ([`super::SignInBox`]).
    pub struct SignInForm {
        pub form: Element,
        pub switch: Element,
        submit: Element,
        error: Element,
        name: HtmlInputElement,
        password: HtmlInputElement,
        /// It creates an account (after "New here?") rather than signing in.
        pub new_account: Cell<bool>,
    }

    impl SignInForm {
        pub fn find(section: &Element) -> Option<Self> {
            let get = |name| dom::part(section, name);
            let input = |name| get(name)?.dyn_into::<HtmlInputElement>().ok();
            Some(Self {
                form: get(part::FORM)?,
                switch: get(part::SWITCH)?,
                submit: get(part::SUBMIT)?,
                error: get(part::ERROR)?,
                name: input(part::NAME)?,
                password: input(part::PASSWORD)?,
                new_account: Cell::new(false),
            })
        }

        /// Says what the form does: create an account, or sign in.
        pub fn show(&self, new_account: bool) {
            self.new_account.set(new_account);
            let words: Words = if new_account { NEW_ACCOUNT } else { SIGN_IN };
            set_attr(&self.form, "aria-label", Some(words.form));
            set_attr(&self.password, "autocomplete", Some(words.password));
            set_text(&self.submit, words.submit);
            set_text(&self.switch, words.switch);
        }

        /// As the server drew it: signing in, nothing typed, nothing said.
        pub fn clear(&self) {
            self.show(false);
            self.name.set_value("");
            self.password.set_value("");
            set_text(&self.error, "");
        }

        /// Signs in, or creates the account; `user` is set, or the form says why not.
        /// Another press while one is on its way is sent too (the first may hang on a
        /// slow link); whichever is granted signs in, and a refusal that comes after
        /// is not said (the form is hidden, and would show it after signing out).
        pub fn submit(self: Rc<Self>, user: RwSignal<Option<User>>) {
            let (name, password, new) = (self.name.value(), self.password.value(), self.new_account.get());
            leptos::task::spawn_local(async move {
                let answer = if new { create_account(name, password).await } else { sign_in(&name, &password).await };
                match answer {
                    Ok(u) => {
                        self.clear();
                        user.try_set(Some(u));
                    }
                    Err(e) if user.try_with_untracked(Option::is_none) == Some(true) => {
                        set_text(&self.error, &e.message)
                    }
                    Err(_) => {}
                }
            })
        }
    }
}

/// The account menu in WASM of its own (`#[lazy]`, built with `--split`): a first
/// visit, signed out, does not download it; a signed-in page fetches it then.
#[cfg(feature = "hydrate")]
#[lazy]
fn account_menu(user: RwSignal<Option<User>>) -> crate::browser::Mount {
    Box::new(move |slot| Box::new(leptos::mount::mount_to(slot, move || view! { <AccountMenu user/> })))
}

/// Makes an account: asks for a sign-up challenge, solves it, and signs up. In WASM of
/// its own (`#[lazy]`, built with `--split`): only a visitor who creates an account
/// downloads it (the solver, its SHA-256, the calls), not the shop's first load.
#[cfg(feature = "hydrate")]
#[lazy]
async fn create_account(name: String, password: String) -> AppResult<User> {
    let solution = match sign_up_challenge().await?.challenge {
        Some(challenge) => Some(challenge.solve().ok_or(ErrorCode::ChallengeRequired)?),
        None => None,
    };
    sign_up(name, password, solution).await
}

/// `sign_in` as the shop's island calls it (`wire`): on every shopper's first load.
#[cfg(feature = "hydrate")]
async fn sign_in(name: &str, password: &str) -> AppResult<User> {
    crate::wire::call(SignIn::PATH, sign_in_args(name, password)).await
}

#[cfg(any(test, feature = "hydrate"))]
fn sign_in_args(name: &str, password: &str) -> crate::wire::Args {
    crate::wire::Args::new().text("name", Some(name)).text("password", Some(password))
}

/// Who is signed in, Sign out, and the account menu: change the password, sign out
/// everywhere.
#[cfg(feature = "hydrate")]
#[component]
fn AccountMenu(user: RwSignal<Option<User>>) -> impl IntoView {
    let sign_out = Action::new(|_: &()| sign_out());
    let everywhere = Action::new(|_: &()| sign_out_everywhere());
    let current = RwSignal::new(String::new());
    let new = RwSignal::new(String::new());
    let change = Action::new(|(current, new): &(String, String)| change_password(current.clone(), new.clone()));
    Effect::new(move |_| {
        if matches!(sign_out.value().get(), Some(Ok(()))) || matches!(everywhere.value().get(), Some(Ok(()))) {
            user.set(None);
        }
    });
    let changed = move || match change.value().get() {
        Some(Ok(())) => Some("Password changed; your other sessions were signed out.".to_owned()),
        Some(Err(e)) => Some(e.message),
        None => None,
    };
    let failed = move || everywhere.value().get().and_then(Result::err).map(|e| e.message);
    view! {
        <div class="flex flex-wrap items-center gap-4">
            <span>"Signed in as " <strong>{move || user.get().map(|u| u.name)}</strong></span>
            <button class="rounded border px-3 min-h-11 min-w-11 py-1 text-sm" on:click=move |_| { sign_out.dispatch(()); }>
                "Sign out"
            </button>
            <details class="text-sm">
                <summary class="inline-flex min-h-11 cursor-pointer items-center">"Account"</summary>
                <form class="mt-2 flex flex-wrap items-end gap-3" aria-label="Change password" on:submit=move |ev| {
                    ev.prevent_default();
                    change.dispatch((current.get_untracked(), new.get_untracked()));
                }>
                    <label class=FIELD>
                        "Current password"
                        <input class=INPUT type="password" autocomplete="current-password" required bind:value=current/>
                    </label>
                    <label class=FIELD>
                        "New password"
                        <input class=INPUT type="password" autocomplete="new-password" required bind:value=new/>
                    </label>
                    <button class="rounded border px-3 min-h-11 min-w-11 py-1" type="submit">"Change password"</button>
                    <p role="status">{changed}</p>
                </form>
                <button class="mt-2 rounded border px-3 min-h-11 min-w-11 py-1" on:click=move |_| { everywhere.dispatch(()); }>
                    "Sign out everywhere"
                </button>
                <p role="alert" class="text-red-700">{failed}</p>
            </details>
        </div>
    }
}

#[cfg(all(test, not(feature = "hydrate")))]
mod tests {
    use super::{super::api::SignIn, *};

    /// The island's sign-in sends what the server function takes.
    #[test]
    fn sign_in_sends_the_server_functions_arguments() {
        let sent = serde_json::Value::Object(sign_in_args("ann", "pw \" <").map);
        let taken = SignIn { name: "ann".into(), password: "pw \" <".into() };
        assert_eq!(sent, serde_json::to_value(taken).unwrap());
    }
}
