//! A sale card in the browser: the shop's island paints what [`CardView`] says into
//! the card the server drew (`view::sale_card`, its `data-part`s) and answers its Grab
//! button: for a sale with a fair start it first asks for the shopper's grab token
//! (issued from the start), then grabs with it, retries what a busy server shed or a
//! link lost (a grant then heard as `already_bought`, with its order), and follows the
//! order until it is decided. A press made before the island arrived
//! (`early`) is taken over: its answer shown and followed as if made here.
//!
//! The calls are made by the browser without serde (`wire`): the shop's island is every
//! shopper's first load. Their arguments are the server functions' (a test holds them
//! to it).

#[cfg(any(test, feature = "hydrate"))]
use super::api::{Grab, GrabResult, GrabToken};
use super::GrabTicket;
#[cfg(feature = "hydrate")]
use super::{GrabProgress, IssuedToken};
#[cfg(feature = "hydrate")]
use crate::error::AppResult;
use crate::wire;
#[cfg(feature = "hydrate")]
use leptos::server_fn::ServerFn;

#[cfg(feature = "hydrate")]
pub use painted::Card;

#[cfg(feature = "hydrate")]
async fn grab_token(voucher_id: i64) -> AppResult<IssuedToken> {
    wire::call(GrabToken::PATH, token_args(voucher_id)).await
}

fn token_args(voucher_id: i64) -> wire::Args {
    wire::Args::new().int("voucher_id", voucher_id)
}

#[cfg(feature = "hydrate")]
async fn grab(voucher_id: i64, token: Option<String>, again: bool) -> AppResult<GrabTicket> {
    wire::call(Grab::PATH, grab_args(voucher_id, token.as_deref(), again)).await
}

fn grab_args(voucher_id: i64, token: Option<&str>, again: bool) -> wire::Args {
    wire::Args::new().int("voucher_id", voucher_id).text("token", token).flag("again", again)
}

#[cfg(feature = "hydrate")]
async fn grab_result(voucher_id: i64, ticket: &GrabTicket) -> AppResult<GrabProgress> {
    wire::call(GrabResult::PATH, result_args(voucher_id, ticket)).await
}

fn result_args(voucher_id: i64, ticket: &GrabTicket) -> wire::Args {
    wire::Args::new()
        .int("voucher_id", voucher_id)
        .text("order_id", Some(&ticket.order_id))
        .text("receipt", Some(&ticket.receipt))
}

#[cfg(feature = "hydrate")]
mod painted {
    use super::{super::view::part, *};
    use crate::{
        browser::{
            dom::{self, set_flag, set_text},
            jitter, pause,
        },
        error::{AppError, ErrorCode},
        orders::{Order, OrderStatus},
        sale::{view::CardView, Queued},
    };
    use leptos::prelude::{GetUntracked, RwSignal};
    use std::{
        cell::{Cell, RefCell},
        rc::{Rc, Weak},
    };
    use web_sys::Element;

    /// Times a grab the server shed, or whose answer was lost, is tried again by the
    /// page before it says so.
    const RETRIES: u32 = 4;
    /// Polls of an order's result in a row without an answer before the page says so
    /// (and asks on).
    const SAY_AFTER: u32 = 3;

    /// The parts of a drawn card that the browser changes.
    struct Parts {
        title: Element,
        price: Element,
        left: Element,
        badge: Element,
        countdown: Element,
        grab: Element,
        order: Element,
        order_id: Element,
        progress: Element,
        status: Element,
        refusal: Element,
    }

    /// One drawn card, painted and answered by the island.
    pub struct Card {
        pub id: i64,
        pub root: Element,
        parts: Parts,
        /// What was painted last (`None`: what the server drew).
        shown: RefCell<Option<CardView>>,
        /// A grab is on its way: the button waits.
        pending: Cell<bool>,
        /// The order shown, followed until it was decided: a press that names it again
        /// (`already_bought`) leaves it as it is.
        tracked: RefCell<Option<String>>,
        /// Followings of a grab's result under way (a new press's starts before the
        /// last one's has seen it is no longer shown).
        following: Cell<u32>,
        /// How many times the page's shopper signed out, and the count the card last
        /// saw: after a sign-out the card forgets the order it showed, and a press's
        /// answer that comes after one is its shopper's, not the next one's.
        signed_out: RwSignal<u32>,
        seen_signed_out: Cell<u32>,
        /// Grab's listener, dropped with the card (it holds the card weakly).
        pressed: RefCell<Option<dom::Listener>>,
    }

    impl Card {
        /// The card drawn at `root` (`None`: not a card, or a part is missing), on a
        /// page whose sign-outs `signed_out` counts. It answers nothing until
        /// [`Card::listen`].
        pub fn find(root: Element, signed_out: RwSignal<u32>) -> Option<Self> {
            let id = root.get_attribute(part::CARD)?.parse().ok()?;
            let get = |name| dom::part(&root, name);
            let parts = Parts {
                title: get(part::TITLE)?,
                price: get(part::PRICE)?,
                left: get(part::LEFT)?,
                badge: get(part::BADGE)?,
                countdown: get(part::COUNTDOWN)?,
                grab: get(part::GRAB)?,
                order: get(part::ORDER)?,
                order_id: get(part::ORDER_ID)?,
                progress: get(part::PROGRESS)?,
                status: get(part::STATUS)?,
                refusal: get(part::REFUSAL)?,
            };
            Some(Self {
                id,
                root,
                parts,
                shown: RefCell::new(None),
                pending: Cell::new(false),
                tracked: RefCell::default(),
                following: Cell::new(0),
                signed_out,
                seen_signed_out: Cell::new(signed_out.get_untracked()),
                pressed: RefCell::default(),
            })
        }

        /// Answers the card's Grab from now on, and takes over its early press
        /// (`early`; call after `early::take_over`, so that a press is answered once).
        pub fn listen(self: &Rc<Self>) {
            // Pressed already when the page's script pressed it.
            self.pending.set(super::super::early::pressed(self.id));
            let card = Rc::downgrade(self);
            let pressed = dom::on(&self.parts.grab, "click", move |_| {
                if let Some(card) = Weak::upgrade(&card) {
                    card.press(None);
                }
            });
            *self.pressed.borrow_mut() = Some(pressed);
            let early = self.clone();
            leptos::task::spawn_local(async move {
                if let Some(answer) = super::super::early::answer(early.id).await {
                    early.press(Some(answer));
                }
            });
        }

        /// Paints `view`, where it differs from what is shown.
        pub fn paint(&self, view: CardView) {
            if self.shown.borrow().as_ref() == Some(&view) {
                return;
            }
            let p = &self.parts;
            set_text(&p.title, &view.title);
            dom::set_attr(&self.root, "aria-label", Some(&view.title));
            set_text(&p.price, &view.price);
            set_text(&p.left, &view.left);
            set_text(&p.badge, view.badge.unwrap_or_default());
            set_text(&p.countdown, &view.countdown);
            set_flag(&p.grab, "data-fair", view.fair);
            dom::set_attr(&p.grab, "data-opens", view.opens.map(|ms| ms.to_string()).as_deref());
            *self.shown.borrow_mut() = Some(view);
            self.paint_button();
        }

        /// Grab waits while a grab is on its way, and stays shut while the sale is closed.
        fn paint_button(&self) {
            let closed = self.shown.borrow().as_ref().is_none_or(|v| v.closed);
            set_flag(&self.parts.grab, "disabled", self.pending.get() || closed);
        }

        fn refuse(&self, why: &str) {
            set_text(&self.parts.refusal, why);
        }

        fn show_progress(&self, progress: &GrabProgress) {
            set_text(&self.parts.status, &progress.text());
        }

        /// A press: made here (`None`), or the page's script's (`Some`), whose answer
        /// is `None` when it could not be sent or read.
        fn press(self: Rc<Self>, early: Option<Option<AppResult<GrabTicket>>>) {
            if early.is_none() && self.pending.get() {
                return;
            }
            self.pending.set(true);
            self.paint_button();
            let fair = self.shown.borrow().as_ref().is_some_and(|v| v.fair);
            let shopper = self.signed_out.get_untracked();
            leptos::task::spawn_local(async move {
                let answer = self.grab_with_retries(early, fair).await;
                self.pending.set(false);
                self.paint_button();
                if self.signed_out.try_get_untracked() != Some(shopper) {
                    return self.forget();
                }
                match answer {
                    Ok(ticket) => {
                        self.refuse("");
                        self.track(ticket).await;
                    }
                    Err(e) => {
                        self.refuse(&e.message);
                        // The order the shopper holds, followed as a grant is: their
                        // earlier grab's, or this one's whose answer was lost, which
                        // may yet turn out lost itself.
                        if let Some(ticket) = held(e) {
                            self.track(ticket).await;
                        }
                    }
                }
            })
        }

        /// Shows `ticket`'s order and follows it until it is decided, unless it is the
        /// order shown already (followed, or decided and shown so).
        async fn track(&self, ticket: GrabTicket) {
            if self.shows(&ticket) {
                return;
            }
            self.show_order(Some(&ticket.order_id));
            self.show_progress(&GrabProgress::queued());
            self.following.set(self.following.get() + 1);
            self.follow(ticket).await;
            self.following.set(self.following.get() - 1);
        }

        async fn grab_with_retries(
            &self,
            early: Option<Option<AppResult<GrabTicket>>>,
            fair: bool,
        ) -> AppResult<GrabTicket> {
            let id = self.id;
            // The token, once had, serves every retry.
            let token = &RefCell::new(None::<String>);
            // Sent `again` when an earlier try may have been granted: asked of the gate
            // past this process's sold-out flag, which would hide the order.
            let once = |again: bool| async move {
                if fair && token.borrow().is_none() {
                    let issued = grab_token(id).await?.token;
                    *token.borrow_mut() = Some(issued);
                }
                let token = token.borrow().clone();
                grab(id, token, again).await
            };
            // An early press whose answer was lost is pressed again: if it reached the
            // gate, the retry hears `already_bought`, and says so below.
            let (mut answer, mut retried) = match early {
                Some(Some(answer)) => (answer, false),
                Some(None) => (once(true).await, true),
                None => (once(false).await, false),
            };
            // A busy server sheds with `unavailable` and `Retry-After: 1`: say so and try
            // again after that second, doubling, each plus a random share as long, so
            // shed shoppers do not all come back at once. An answer lost on the way (a
            // phone's link dropped it) is asked again alike: a grab that was granted
            // hears `already_bought` with its order, which is followed.
            for attempt in 0..RETRIES {
                match &answer {
                    Err(e) if matches!(e.code, ErrorCode::Unavailable | ErrorCode::Network) => {
                        let unanswered = e.code == ErrorCode::Network;
                        self.refuse(if unanswered { "No answer, asking again…" } else { "Busy, retrying…" });
                        let wait = 1000u32 << attempt;
                        pause(wait + jitter(wait)).await;
                        retried = true;
                        answer = once(true).await;
                    }
                    _ => break,
                }
            }
            // An `unavailable` that was a slow gate, not a shed, or an answer lost, may
            // have been granted after all: the retry then hears `already_bought`, and
            // says so.
            if let Err(e) = &mut answer {
                if retried && e.code == ErrorCode::AlreadyBought {
                    e.message = "Your grab went through.".into();
                }
            }
            answer
        }

        /// Polls the grab's result until it is no longer queued, its card is gone (a
        /// withdrawn sale's), or another order is shown (granted once this one was lost).
        /// A poll that could not be answered (a lost answer, a store failing over, a
        /// busy limit) is asked again, and after a few in a row the page says why; a
        /// refusal ends the following, and a later press that names the order follows
        /// it again.
        async fn follow(&self, ticket: GrabTicket) {
            let mut wait = 200;
            let mut unanswered = 0;
            loop {
                pause(wait).await;
                if !self.shows(&ticket) || !self.root.is_connected() {
                    return;
                }
                let answer = grab_result(self.id, &ticket).await;
                // Another order may be shown by now (this poll was slow).
                if !self.shows(&ticket) {
                    return;
                }
                match answer {
                    Ok(r) => {
                        self.show_progress(&r);
                        // Failed: the status says why; "went through" would not hold.
                        // Answered after the page said it could not be: that is over.
                        if r.reason.is_some() || unanswered >= SAY_AFTER {
                            self.refuse("");
                        }
                        unanswered = 0;
                        if r != GrabProgress::queued() {
                            return;
                        }
                    }
                    Err(e)
                        if matches!(e.code, ErrorCode::Network | ErrorCode::Unavailable | ErrorCode::RateLimited) =>
                    {
                        unanswered += 1;
                        if unanswered >= SAY_AFTER {
                            self.refuse(&e.message);
                        }
                    }
                    Err(e) => {
                        self.tracked.borrow_mut().take();
                        return self.refuse(&e.message);
                    }
                }
                wait = (wait * 2).min(2000);
            }
        }

        /// Follows the shopper's saved orders as My orders last listed them: the card
        /// shows the sale's order the shopper holds (on a page opened again after a
        /// grab, or an order made in another tab), and how the order it shows stands
        /// now (paid, or cancelled: then Grab is the shopper's to press again). Not
        /// while a press is on its way: its answer names the order to show.
        /// Forgets the order shown once its shopper signed out.
        pub fn show_orders(&self, orders: &[Order]) {
            if self.pending.get() {
                return;
            }
            let signed_out = self.signed_out.get_untracked();
            if self.seen_signed_out.replace(signed_out) != signed_out {
                return self.forget();
            }
            // A grab being followed is the card's: a list older than it may still name
            // an order cancelled since (in another tab) as held.
            let followed = self.following.get() > 0;
            let order = {
                let tracked = self.tracked.borrow();
                let mine = || orders.iter().filter(|o| o.voucher_id == self.id);
                let held = mine().find(|o| o.status != OrderStatus::Cancelled);
                let Some(order) = held.or_else(|| mine().find(|o| tracked.as_ref() == Some(&o.order_id))) else {
                    return;
                };
                if tracked.as_ref() != Some(&order.order_id) && followed {
                    return;
                }
                order
            };
            if !self.shows_id(&order.order_id) {
                self.show_order(Some(&order.order_id));
            }
            self.show_progress(&GrabProgress::of_order(order));
        }

        /// Shows `order_id` as the card's order, followed or decided (`None`: none).
        fn show_order(&self, order_id: Option<&str>) {
            *self.tracked.borrow_mut() = order_id.map(str::to_owned);
            if let Some(id) = order_id {
                set_text(&self.parts.order_id, id);
            }
            set_flag(&self.parts.order, "hidden", order_id.is_none());
            set_flag(&self.parts.progress, "hidden", order_id.is_none());
        }

        /// Forgets the order shown (its shopper signed out).
        fn forget(&self) {
            self.show_order(None);
            set_text(&self.parts.status, "");
            self.refuse("");
        }

        /// Whether `ticket`'s order is the one the card shows.
        fn shows(&self, ticket: &GrabTicket) -> bool {
            self.shows_id(&ticket.order_id)
        }

        fn shows_id(&self, order_id: &str) -> bool {
            self.tracked.borrow().as_deref() == Some(order_id)
        }
    }

    /// The order an `already_bought` refusal names, with its receipt, as a ticket to
    /// follow.
    fn held(refusal: AppError) -> Option<GrabTicket> {
        if refusal.code != ErrorCode::AlreadyBought {
            return None;
        }
        let (order_id, receipt) = (refusal.order_id?, refusal.receipt?);
        Some(GrabTicket { order_id, status: Queued::Queued, receipt })
    }
}

#[cfg(all(test, not(feature = "hydrate")))]
mod tests {
    use super::*;

    /// The island's calls send what the server functions take.
    #[test]
    fn the_cards_calls_send_the_server_functions_arguments() {
        let json = |args: wire::Args| serde_json::Value::Object(args.map);
        let grab = Grab { voucher_id: 7, token: Some("t".into()), again: Some(false) };
        assert_eq!(json(grab_args(7, Some("t"), false)), serde_json::to_value(grab).unwrap());
        let grab = Grab { voucher_id: 7, token: None, again: Some(true) };
        assert_eq!(json(grab_args(7, None, true)), serde_json::to_value(grab).unwrap());
        let ticket = GrabTicket { order_id: "12".into(), status: super::super::Queued::Queued, receipt: "r".into() };
        let asked = GrabResult { voucher_id: 7, order_id: "12".into(), receipt: Some("r".into()) };
        assert_eq!(json(result_args(7, &ticket)), serde_json::to_value(asked).unwrap());
        let token = GrabToken { voucher_id: 7 };
        assert_eq!(json(token_args(7)), serde_json::to_value(token).unwrap());
    }

    /// A card shows a saved order as the grab's success until it is paid or lapses.
    #[test]
    fn a_card_says_how_its_saved_order_stands() {
        use crate::orders::{CancelReason, Order, OrderStatus};
        let at = chrono::DateTime::from_timestamp_millis(1_764_000_000_000).unwrap();
        let order = |status, cancel_reason| Order {
            order_id: "12".into(),
            voucher_id: 7,
            user_id: 2,
            title: "Tea".into(),
            status,
            created_at: at,
            pay_deadline: at,
            cancel_reason,
            price: 100,
            currency: "EUR".into(),
        };
        let says = |status, reason| super::super::GrabProgress::of_order(&order(status, reason)).text();
        assert_eq!(says(OrderStatus::Unpaid, None), "success");
        assert_eq!(says(OrderStatus::Paid, None), "paid");
        assert_eq!(says(OrderStatus::Cancelled, Some(CancelReason::Timeout)), "cancelled (timeout)");
        assert_eq!(says(OrderStatus::Cancelled, Some(CancelReason::Shopper)), "cancelled (shopper)");
    }
}
