//! The shop's island in the browser. It starts from what the page carries
//! ([`ShopStart`]), takes Grab over from the page's script (`early`), and from then on:
//! - repaints every card ten times a second from the list, the live feed and the
//!   gate's clock ([`CardView`], `sale::card`);
//! - lists again every 5 seconds: a new sale's card is drawn from the page's empty
//!   one, a withdrawn sale's card goes;
//! - asks who is signed in, answers the account box, and mounts the account menu and
//!   My orders while someone is.

use super::{ids, ShopStart};
use crate::{
    auth::{account_box::follow_sign_in, api::Me, CurrentUser, User},
    browser::{
        dom::{self, set_attr, set_flag, set_text},
        every, while_some, Mount,
    },
    listing::Page,
    live::{view::follow_shop_feed, StockLive},
    orders::{view::MyOrders, Order},
    sale::{
        card::Card,
        clock::{GateClock, TICK_MS},
        early,
        view::{part, CardView, LiveSale},
    },
    voucher::{api::ListVouchers, Voucher},
    wire,
};
use chrono::{DateTime, Utc};
use leptos::{prelude::*, server_fn::ServerFn};
use std::{
    cell::{Cell, RefCell},
    collections::HashMap,
    rc::Rc,
};
use wasm_bindgen::JsCast;
use web_sys::{Element, HtmlElement, HtmlTemplateElement};

/// How often the list is asked for again (ms): new sales appear.
const RELIST_MS: u64 = 5000;

/// Starts the shop's island.
pub fn start() {
    let user = RwSignal::new(None::<User>);
    ask_who(user);
    if follow_sign_in(user).is_none() {
        leptos::logging::warn!("the shop's account box is missing");
    }
    let start = ShopStart::here();
    let clock = GateClock::start(start.as_ref().and_then(|s| s.rendered_ms));
    // My orders counts down to each payment deadline by the gate's clock.
    let now = RwSignal::new(clock.now().unwrap_or_else(Utc::now));
    // My orders lists them; each card shows its sale's. A sign-out forgets them, and
    // each card the order it showed: the next shopper on this page sees none of them.
    let orders = RwSignal::new(Vec::<Order>::new());
    let signed_out = RwSignal::new(0u32);
    if let Some(slot) = document().get_element_by_id(ids::ORDERS).and_then(|e| e.dyn_into::<HtmlElement>().ok()) {
        let signed_in = Cell::new(false);
        while_some(
            user,
            slot,
            move |user| my_orders(user, now, orders),
            move |now_in| {
                if signed_in.replace(now_in) && !now_in {
                    orders.set(Vec::new());
                    signed_out.update(|n| *n += 1);
                }
            },
        );
    }
    // Without its start, or with a card it cannot read (a page something rewrote on
    // its way), the island cannot paint the page's cards: the page's script keeps
    // answering Grab.
    let shop = start.and_then(|start| Shop::find(start, clock.clone(), (orders, signed_out)));
    every(TICK_MS, {
        let shop = shop.clone();
        move || {
            now.try_set(clock.now().unwrap_or_else(Utc::now));
            if let Some(shop) = &shop {
                shop.repaint();
            }
        }
    });
    let Some(shop) = shop else {
        leptos::logging::warn!(
            "the shop's start ({}) or a card is missing or unreadable: Grab stays with the page's script",
            ids::START
        );
        return;
    };
    every(RELIST_MS, {
        let shop = shop.clone();
        move || shop.clone().relist_soon()
    });
    let painted = shop.clone();
    follow_shop_feed(shop.live.clone(), move || painted.repaint());
}

/// Who is signed in is asked by the browser once the page is live, never rendered by
/// the server: the server's page is then the same for every visitor, and one render
/// serves them all (`server::page_cache`). The answer only fills an empty box: a
/// sign-in made while it was on its way wins.
fn ask_who(user: RwSignal<Option<User>>) {
    leptos::task::spawn_local(async move {
        if let Ok(CurrentUser { user: Some(u) }) = wire::call(Me::PATH, wire::Args::new()).await {
            if user.try_get_untracked().flatten().is_none() {
                user.try_set(Some(u));
            }
        }
    })
}

/// The shopper's orders in WASM of their own (`#[lazy]`, built with `--split`): a first
/// visit, signed out, does not download them; signing in fetches them.
#[lazy]
fn my_orders(user: RwSignal<Option<User>>, now: RwSignal<DateTime<Utc>>, orders: RwSignal<Vec<Order>>) -> Mount {
    Box::new(move |slot| Box::new(leptos::mount::mount_to(slot, move || view! { <MyOrders user now orders/> })))
}

/// The list of sales as the page shows it.
struct Shop {
    clock: Rc<GateClock>,
    listed: RefCell<Vec<Voucher>>,
    /// Whether the page has had a list: until then it says why it could not.
    had_list: Cell<bool>,
    live: Rc<RefCell<HashMap<i64, StockLive>>>,
    /// The shopper's orders, as My orders last listed them (none while signed out),
    /// and how many sign-outs there were (each card forgets its order after one).
    orders: RwSignal<Vec<Order>>,
    signed_out: RwSignal<u32>,
    cards: RefCell<Vec<Rc<Card>>>,
    grid: Element,
    empty: Element,
    refused: Element,
    template: HtmlTemplateElement,
    /// A listing is on its way: on a link slower than the period, answers neither pile
    /// up nor land out of order (an older one over a newer).
    listing: Cell<bool>,
}

impl Shop {
    /// The list the server drew, every card of it answered from now on (`None`: a
    /// part or a card could not be read, and nothing was taken over). Grab is the
    /// island's before any card is: the page's script stands down.
    fn find(
        start: ShopStart,
        clock: Rc<GateClock>,
        (orders, signed_out): (RwSignal<Vec<Order>>, RwSignal<u32>),
    ) -> Option<Rc<Self>> {
        let sales = document().get_element_by_id(ids::SALES)?;
        let get = |name| dom::part(&sales, name);
        let (grid, empty, refused) = (get(ids::GRID)?, get(ids::EMPTY)?, get(ids::REFUSED)?);
        let template = document().get_element_by_id(ids::CARD_TEMPLATE)?.dyn_into().ok()?;
        let drawn = grid.query_selector_all(&format!("[{}]", part::CARD)).ok()?;
        let cards: Vec<Rc<Card>> = (0..drawn.length())
            .map(|i| Card::find(drawn.item(i)?.dyn_into().ok()?, signed_out).map(Rc::new))
            .collect::<Option<_>>()?;
        early::take_over();
        cards.iter().for_each(Card::listen);
        let shop = Rc::new(Self {
            clock,
            listed: RefCell::new(Vec::new()),
            had_list: Cell::new(start.refusal.is_none()),
            live: Rc::default(),
            orders,
            signed_out,
            cards: RefCell::new(cards),
            grid,
            empty,
            refused,
            template,
            listing: Cell::new(false),
        });
        if start.refusal.is_none() {
            shop.relist(start.vouchers);
        }
        Some(shop)
    }

    /// Paints every card as it stands now, with the shopper's order of its sale.
    fn repaint(&self) {
        let (now, known) = self.clock.now().map_or_else(|| (Utc::now(), false), |now| (now, true));
        let (listed, live) = (self.listed.borrow(), self.live.borrow());
        for card in self.cards.borrow().iter() {
            if let Some(v) = listed.iter().find(|v| v.id == card.id) {
                let sale = live.get(&card.id).map(live_sale);
                card.paint(CardView::of(v, sale.as_ref(), now, known));
            }
            self.orders.with_untracked(|orders| card.show_orders(orders));
        }
    }

    /// Asks for the list again, unless an answer is still on its way. A refusal
    /// keeps the cards shown (a busy server's answer is no reason to take Grab away),
    /// and only says so while the page has had no list.
    fn relist_soon(self: Rc<Self>) {
        if self.listing.replace(true) {
            return;
        }
        leptos::task::spawn_local(async move {
            match wire::call::<Page<Voucher>>(ListVouchers::PATH, wire::Args::new()).await {
                Ok(page) => self.relist(page.items),
                Err(e) if !self.had_list.get() => set_text(&self.refused, &e.message),
                Err(_) => {}
            }
            self.listing.set(false);
        })
    }

    /// The cards follow `list`: in its order, a new sale's card drawn, a withdrawn
    /// one's gone; the others keep what they hold (a grab's result).
    fn relist(&self, list: Vec<Voucher>) {
        {
            let mut cards = self.cards.borrow_mut();
            let old = std::mem::take(&mut *cards);
            for v in &list {
                let kept = old.iter().find(|c| c.id == v.id).cloned();
                cards.extend(kept.or_else(|| self.draw(v.id)));
            }
            for gone in old.iter().filter(|c| !cards.iter().any(|k| k.id == c.id)) {
                gone.root.remove();
            }
            // In the list's order, moving only what is out of place.
            let mut at = self.grid.first_element_child();
            for card in cards.iter() {
                if at.as_ref() == Some(&card.root) {
                    at = card.root.next_element_sibling();
                } else {
                    let _ = self.grid.insert_before(&card.root, at.as_ref().map(|e| e.unchecked_ref()));
                }
            }
        }
        self.had_list.set(true);
        set_flag(&self.refused, "hidden", true);
        set_flag(&self.empty, "hidden", !list.is_empty());
        set_flag(&self.grid, "hidden", list.is_empty());
        *self.listed.borrow_mut() = list;
        self.repaint();
    }

    /// A new sale's card, from the page's empty one.
    fn draw(&self, id: i64) -> Option<Rc<Card>> {
        let root: Element =
            self.template.content().first_element_child()?.clone_node_with_deep(true).ok()?.dyn_into().ok()?;
        let id = id.to_string();
        set_attr(&root, part::CARD, Some(&id));
        set_attr(&dom::part(&root, part::GRAB)?, "data-grab", Some(&id));
        let card = Rc::new(Card::find(root, self.signed_out)?);
        card.listen();
        Some(card)
    }
}

/// The sale as the live feed has it.
fn live_sale(l: &StockLive) -> LiveSale {
    LiveSale {
        left: l.left,
        sold_out: l.sold_out,
        paused: l.paused,
        begins_at_ms: l.begins_at_ms,
        ends_at_ms: l.ends_at_ms,
    }
}
