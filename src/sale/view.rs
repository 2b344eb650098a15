//! A sale card: title, price, units left, its state, countdown, the Grab button and
//! the grab's result. What it says at an instant is [`CardView`]'s: the server draws
//! it ([`sale_card`]) from the listed voucher and, when the live feed has it, the sale
//! as the gate sees it now ([`LiveSale`]); in the browser the shop's island repaints
//! the drawn card's parts ([`part`]) from the same [`CardView`] (`sale::card`), so
//! the card's markup is written once, here.

use crate::{
    money,
    voucher::{SaleState, Voucher},
};
use chrono::{DateTime, Utc};
use leptos::prelude::*;

/// A sale as the gate sees it now, ahead of the list's refresh: units left, sold out,
/// paused, and its window (Unix ms; an operator may have moved it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveSale {
    /// -1 when Redis does not hold the sale.
    pub left: i64,
    pub sold_out: bool,
    pub paused: bool,
    pub begins_at_ms: i64,
    pub ends_at_ms: i64,
}

/// Countdown text: "Starts in 1m 05s", "Ends in 12s", "Ended".
pub fn countdown(now: DateTime<Utc>, begins: DateTime<Utc>, ends: DateTime<Utc>) -> String {
    let fmt = crate::browser::clock;
    // Rounded up, so "0s" never shows while the moment is still ahead.
    let ceil_secs = |d: chrono::TimeDelta| (d.num_milliseconds().max(0) + 999) / 1000;
    if now < begins {
        format!("Starts in {}", fmt(ceil_secs(begins - now)))
    } else if now < ends {
        format!("Ends in {}", fmt(ceil_secs(ends - now)))
    } else {
        "Ended".to_owned()
    }
}

/// What a card says at one instant: the one source of its texts, for the server's
/// drawing ([`sale_card`]) and the browser's painting (`sale::card`) alike.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CardView {
    pub title: String,
    /// Price and worth; empty for a free voucher.
    pub price: String,
    /// "3 of 10 left".
    pub left: String,
    /// Paused, Sold out or Ended; `None` while it is scheduled or live.
    pub badge: Option<&'static str>,
    /// "Starts in …", "Ends in …"; empty once it ended.
    pub countdown: String,
    /// Grab is closed: not open by the gate's clock, or the clock is not known yet. A
    /// paused sale's press stays open, and is answered with why.
    pub closed: bool,
    /// A sale not yet open: its opening instant (Unix ms), for the page's script to
    /// enable the button at before the island arrives (`early`).
    pub opens: Option<i64>,
    /// Grab asks for a grab token first (`grab_token`).
    pub fair: bool,
}

impl CardView {
    /// The card of `v` at `now` (the gate's time as the page knows it; `known`: whether
    /// the page has it), with the sale as the gate sees it when the live feed has it.
    pub fn of(v: &Voucher, live: Option<&LiveSale>, now: DateTime<Utc>, known: bool) -> Self {
        let window = live.map(|l| (l.paused, l.begins_at_ms, l.ends_at_ms, l.sold_out || l.left == 0));
        let state = v.state(now, window);
        // The gate's window when the feed has it (an operator may have moved it).
        let at = |ms: Option<i64>, listed| {
            ms.filter(|ms| *ms > 0).and_then(DateTime::from_timestamp_millis).unwrap_or(listed)
        };
        let begins = at(live.map(|l| l.begins_at_ms), v.begins_at);
        let ends = at(live.map(|l| l.ends_at_ms), v.ends_at);
        let price = if v.price > 0 || v.face_value > 0 {
            let worth = if v.face_value > v.price {
                format!(" (worth {})", money::format(v.face_value, &v.currency))
            } else {
                String::new()
            };
            format!("{}{worth}", money::format(v.price, &v.currency))
        } else {
            String::new()
        };
        // Units left as the feed has them, else the list's.
        let remaining = live.map_or(v.remaining, |l| l.left.max(0));
        Self {
            title: v.title.clone(),
            price,
            left: format!("{remaining} of {} left", v.stock),
            badge: matches!(state, SaleState::Paused | SaleState::SoldOut | SaleState::Ended).then(|| state.label()),
            countdown: if state == SaleState::Ended { String::new() } else { countdown(now, begins, ends) },
            closed: !known || !matches!(state, SaleState::Live | SaleState::Paused),
            opens: (state == SaleState::Scheduled).then(|| begins.timestamp_millis()),
            fair: v.fair_start,
        }
    }
}

/// The card's parts the browser paints (`data-part`), and the card's own mark
/// (`data-card`, its voucher's id).
pub mod part {
    /// As [`super::sale_card`] writes it.
    #[cfg(feature = "hydrate")]
    pub const CARD: &str = "data-card";
    pub const TITLE: &str = "title";
    pub const PRICE: &str = "price";
    pub const LEFT: &str = "left";
    pub const BADGE: &str = "badge";
    pub const COUNTDOWN: &str = "countdown";
    pub const GRAB: &str = "grab";
    pub const ORDER: &str = "order";
    pub const ORDER_ID: &str = "order-id";
    pub const PROGRESS: &str = "progress";
    pub const STATUS: &str = "status";
    pub const REFUSAL: &str = "refusal";
}

/// One sale as the server draws it: title, price, stock, its state, countdown, the Grab
/// button and (empty, for the browser to fill) the grab's order, its status and why a
/// grab was refused. The browser repaints its parts (`sale::card`); nothing here moves.
pub fn sale_card(id: i64, card: CardView) -> impl IntoView {
    let CardView { title, price, left, badge, countdown, closed, opens, fair } = card;
    view! {
        <article class="rounded-lg bg-white p-4 shadow" aria-label=title data-card=id>
            <h2 class="text-lg font-semibold" data-part=part::TITLE>{title.clone()}</h2>
            <p class="font-semibold" data-part=part::PRICE>{price}</p>
            <p data-part=part::LEFT>{left}</p>
            // Always in the page, empty when there is nothing to say: a live region
            // that appears with its text is often not read out.
            <p role="status" class="font-semibold text-rose-700" data-part=part::BADGE>{badge}</p>
            <p class="text-sm text-slate-600" data-part=part::COUNTDOWN>{countdown}</p>
            // `data-grab`, `data-fair`, `data-opens`: what the page's script reads before
            // the island arrives (`early`).
            <button class="mt-2 rounded bg-rose-600 px-4 min-h-11 min-w-11 py-1 text-white disabled:opacity-50"
                data-part=part::GRAB data-grab=id data-fair=fair.then_some("") data-opens=opens disabled=closed>
                "Grab"
            </button>
            <p data-part=part::ORDER hidden>"Order " <span class="font-mono" data-part=part::ORDER_ID></span></p>
            <p data-part=part::PROGRESS hidden>"Status: " <span data-part=part::STATUS></span></p>
            <p role="alert" class="text-sm text-red-700" data-part=part::REFUSAL></p>
        </article>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a card says, from the list and from the live feed ahead of it.
    #[test]
    fn a_card_says_the_sale_as_the_gate_sees_it() {
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let mut v = Voucher::sample("Tea");
        v.paused = false;
        v.remaining = 4;
        v.begins_at = t("2026-11-23T10:00:00Z");
        v.ends_at = t("2026-11-23T11:00:00Z");
        let before = CardView::of(&v, None, t("2026-11-23T09:59:58Z"), true);
        assert_eq!(before.countdown, "Starts in 2s");
        assert_eq!(before.left, format!("4 of {} left", v.stock));
        assert_eq!((before.badge, before.closed, before.opens), (None, true, Some(v.begins_at.timestamp_millis())));
        assert!(before.fair && !before.price.is_empty());
        let open = CardView::of(&v, None, t("2026-11-23T10:00:00Z"), true);
        assert_eq!((open.closed, open.opens, open.countdown.as_str()), (false, None, "Ends in 1h 00m 00s"));
        // Until the page has the gate's time, Grab stays closed.
        assert!(CardView::of(&v, None, t("2026-11-23T10:00:00Z"), false).closed);
        // The feed's word wins: sold out, and a window an operator moved.
        let live = LiveSale { left: 0, sold_out: true, paused: false, begins_at_ms: 0, ends_at_ms: 0 };
        let sold = CardView::of(&v, Some(&live), t("2026-11-23T10:00:01Z"), true);
        assert_eq!((sold.badge, sold.closed, sold.left.as_str()), (Some("Sold out"), true, "0 of 100 left"));
        let moved = LiveSale { left: 3, begins_at_ms: v.begins_at.timestamp_millis() + 60_000, ..live };
        let moved = CardView::of(&v, Some(&LiveSale { sold_out: false, ..moved }), t("2026-11-23T10:00:01Z"), true);
        assert_eq!((moved.countdown.as_str(), moved.closed), ("Starts in 59s", true));
        let paused = LiveSale { left: 3, paused: true, ..LiveSale::default() };
        let paused = CardView::of(&v, Some(&paused), t("2026-11-23T10:00:01Z"), true);
        assert_eq!((paused.badge, paused.closed), (Some("Paused"), false));
        let ended = CardView::of(&v, None, t("2026-11-23T11:00:00Z"), true);
        assert_eq!((ended.badge, ended.countdown.as_str(), ended.closed), (Some("Ended"), "", true));
        v.price = 0;
        v.face_value = 0;
        assert_eq!(CardView::of(&v, None, t("2026-11-23T10:00:00Z"), true).price, "");
    }

    #[test]
    fn countdown_reads_naturally() {
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let (b, e) = (t("2026-11-23T10:00:00Z"), t("2026-11-23T11:00:00Z"));
        assert_eq!(countdown(t("2026-11-23T09:58:55Z"), b, e), "Starts in 1m 05s");
        assert_eq!(countdown(t("2026-11-23T10:59:50Z"), b, e), "Ends in 10s");
        assert_eq!(countdown(t("2026-11-23T08:00:00Z"), b, e), "Starts in 2h 00m 00s");
        assert_eq!(countdown(e, b, e), "Ended");
    }
}
