//! Browser helpers: timers, the browser's time zone (for date-time pickers), a
//! self-reconnecting Server-Sent Events reader, how a span of time reads,
//! [`InBrowser`] (children drawn in the browser only), and for the shop's island,
//! which draws no view, [`dom`] (texts and flags changed in place) and `while_some`
//! (a lazy part mounted while someone is signed in). On the server (SSR) the timers
//! and the reader do nothing and the zone is UTC, so components can call them
//! unconditionally; the rest is the browser's alone. It imports no domain and no
//! component.

use leptos::prelude::*;

/// A span of seconds as people read it: "1h 02m 03s", "4m 05s", "12s".
pub fn clock(secs: i64) -> String {
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    if h > 0 {
        format!("{h}h {m:02}m {s:02}s")
    } else if m > 0 {
        format!("{m}m {s:02}s")
    } else {
        format!("{s}s")
    }
}

/// Minutes the browser's time zone is ahead of UTC at the instant `t` (0 on the
/// server, which renders UTC).
pub fn utc_offset_minutes(t: chrono::DateTime<chrono::Utc>) -> i64 {
    #[cfg(feature = "hydrate")]
    {
        let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(t.timestamp_millis() as f64));
        -(date.get_timezone_offset() as i64)
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = t;
        0
    }
}

/// `t` as the browser's wall clock reads it.
fn local(t: chrono::DateTime<chrono::Utc>) -> chrono::NaiveDateTime {
    t.naive_utc() + chrono::Duration::minutes(utc_offset_minutes(t))
}

/// `t` in the browser's time zone as a date-time picker holds it: `2026-11-26T10:30`.
/// By hand: chrono's format engine stays out of the browser's bundle.
pub fn local_input(t: chrono::DateTime<chrono::Utc>) -> String {
    use chrono::{Datelike, Timelike};
    let l = local(t);
    format!("{}-{:02}-{:02}T{:02}:{:02}", l.year(), l.month(), l.day(), l.hour(), l.minute())
}

/// The time of day of `t` in the browser's zone: `10:30:05`.
pub fn local_clock(t: chrono::DateTime<chrono::Utc>) -> String {
    use chrono::Timelike;
    let l = local(t);
    format!("{:02}:{:02}:{:02}", l.hour(), l.minute(), l.second())
}

/// `t` as the operator reads it: `2026-11-26 10:30:05 (UTC+01:00)`, in the browser's zone.
pub fn local_time(t: chrono::DateTime<chrono::Utc>) -> String {
    let offset = utc_offset_minutes(t);
    let sign = if offset < 0 { '-' } else { '+' };
    let (h, m) = (offset.abs() / 60, offset.abs() % 60);
    format!("{} {} (UTC{sign}{h:02}:{m:02})", &local_input(t)[..10], local_clock(t))
}

/// What a date-time picker holds (`2026-11-26T10:30`, the browser's zone) as an
/// instant; `None` when it holds no such thing.
pub fn from_local_input(text: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    let (date, time) = text.trim().split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<u32>().ok());
    let (year, month, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.splitn(3, ':').map(|p| p.parse::<u32>().ok());
    let (hour, minute) = (t.next()??, t.next()??);
    let naive = chrono::NaiveDate::from_ymd_opt(year as i32, month, day)?.and_hms_opt(hour, minute, 0)?;
    // The offset at the instant meant: first guessed from the wall time read as UTC,
    // then taken at that guess (right but within an hour of a clock change).
    let guess = naive.and_utc() - chrono::Duration::minutes(utc_offset_minutes(naive.and_utc()));
    Some(naive.and_utc() - chrono::Duration::minutes(utc_offset_minutes(guess)))
}

/// Calls `f` every `ms` milliseconds in the browser (never on the server), until
/// the calling component is dropped.
pub fn every(ms: u64, f: impl Fn() + 'static) {
    #[cfg(feature = "hydrate")]
    {
        if let Ok(handle) = set_interval_with_handle(f, std::time::Duration::from_millis(ms)) {
            on_cleanup(move || handle.clear());
        }
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (ms, f);
}

/// A monotonic clock (ms from an arbitrary start): `performance.now()` in the browser,
/// which no change of the device's clock moves.
#[cfg(feature = "hydrate")]
pub fn monotonic_ms() -> f64 {
    web_sys::window().and_then(|w| w.performance()).map_or_else(js_sys::Date::now, |p| p.now())
}

/// A random wait of up to `ms` milliseconds, to spread retries.
#[cfg(feature = "hydrate")]
pub fn jitter(ms: u32) -> u32 {
    (js_sys::Math::random() * f64::from(ms)) as u32
}

/// Waits `ms` milliseconds in the browser; returns at once on the server.
pub async fn pause(ms: u32) {
    #[cfg(feature = "hydrate")]
    gloo_timers::future::TimeoutFuture::new(ms).await;
    #[cfg(not(feature = "hydrate"))]
    let _ = ms;
}

/// Draws `children` in the browser only, once the island around it has hydrated; the
/// server (and hydration) see "Loading…". For the operators' pages, whose every part
/// asks the server for what it shows: drawn in the browser, they need nothing carried
/// over from the server's render, and their islands hydrate without their data.
#[component]
pub fn InBrowser(children: ChildrenFn) -> impl IntoView {
    let ready = RwSignal::new(false);
    Effect::new(move |_| ready.set(true));
    view! {
        <Show when=move || ready.get() fallback=|| view! { <p>"Loading…"</p> }>{children()}</Show>
    }
}

/// A lazy part, loaded: it mounts itself into the element it is given, and stays
/// there until its answer is dropped.
#[cfg(feature = "hydrate")]
pub type Mount = Box<dyn FnOnce(web_sys::HtmlElement) -> Box<dyn std::any::Any>>;

/// Shows a part in `slot` while `who` holds someone: `load` (a lazy part's loader)
/// each time it comes to hold someone, the part dropped (unmounted) when it holds none
/// again; `shown` is told each change. A part that arrives after its sign-in ended is
/// never mounted.
#[cfg(feature = "hydrate")]
pub fn while_some<T, F>(
    who: RwSignal<Option<T>>,
    slot: web_sys::HtmlElement,
    load: impl Fn(RwSignal<Option<T>>) -> F + 'static,
    shown: impl Fn(bool) + 'static,
) where
    T: Send + Sync + 'static,
    F: std::future::Future<Output = Mount> + 'static,
{
    use std::{cell::RefCell, rc::Rc};
    // Which sign-in is current, and the part mounted for it.
    let held = Rc::new(RefCell::new((0u32, None::<Box<dyn std::any::Any>>)));
    Effect::new(move |was: Option<bool>| {
        let now = who.with(Option::is_some);
        if was == Some(now) {
            return now;
        }
        shown(now);
        let (mine, gone) = {
            let mut held = held.borrow_mut();
            held.0 += 1;
            (held.0, held.1.take())
        };
        drop(gone);
        if now {
            let (held, slot, part) = (held.clone(), slot.clone(), load(who));
            leptos::task::spawn_local(async move {
                let mount = part.await;
                if held.borrow().0 == mine {
                    let mounted = mount(slot);
                    held.borrow_mut().1 = Some(mounted);
                }
            });
        }
        now
    });
}

/// Painting what the server drew, for the shop's island: it changes texts and flags
/// in place rather than drawing views (`pages::shop`).
#[cfg(feature = "hydrate")]
pub mod dom {
    use wasm_bindgen::{prelude::Closure, JsCast};
    use web_sys::Element;

    /// The element under `root` marked `data-part="{name}"`.
    pub fn part(root: &Element, name: &str) -> Option<Element> {
        root.query_selector(&format!("[data-part=\"{name}\"]")).ok().flatten()
    }

    /// Sets `el`'s text, when it says something else (a live region is not told the
    /// same thing again).
    pub fn set_text(el: &Element, text: &str) {
        if el.text_content().as_deref().unwrap_or_default() != text {
            el.set_text_content(Some(text));
        }
    }

    /// Sets or removes a flag attribute (`hidden`, `disabled`).
    pub fn set_flag(el: &Element, name: &str, on: bool) {
        let _ = el.toggle_attribute_with_force(name, on);
    }

    /// Sets an attribute to `value`, or removes it (unless it already is so).
    pub fn set_attr(el: &Element, name: &str, value: Option<&str>) {
        if el.get_attribute(name).as_deref() == value {
            return;
        }
        let _ = match value {
            Some(value) => el.set_attribute(name, value),
            None => el.remove_attribute(name),
        };
    }

    /// A listener: the closure the browser calls, kept as long as it may be called.
    pub type Listener = Closure<dyn FnMut(web_sys::Event)>;

    /// Calls `f` on each `event` at `el` while the answer is kept (`forget` it for
    /// the page's life).
    #[must_use = "dropped, the listener stops"]
    pub fn on(el: &Element, event: &str, f: impl FnMut(web_sys::Event) + 'static) -> Listener {
        let f = Closure::<dyn FnMut(web_sys::Event)>::new(f);
        let _ = el.add_event_listener_with_callback(event, f.as_ref().unchecked_ref());
        f
    }
}

/// State of an event stream's connection, shown to the operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Connection {
    Connecting,
    #[cfg_attr(not(feature = "hydrate"), expect(dead_code, reason = "only the browser's event stream goes live"))]
    Live,
    Reconnecting,
}

impl Connection {
    pub fn label(self) -> &'static str {
        match self {
            Self::Connecting => "Connecting…",
            Self::Live => "Live",
            Self::Reconnecting => "Reconnecting…",
        }
    }
}

/// Feeds each message of the event stream at `url` to `on_message` until it answers
/// `None` (its component is gone). The browser reconnects after a blip by itself; when
/// it gives up (the server was down), a new connection is tried every 2 seconds.
#[allow(unused_variables)]
pub fn listen<T: 'static>(
    url: &'static str,
    connection: RwSignal<Connection>,
    on_message: impl Fn(String) -> Option<T> + 'static,
) {
    #[cfg(feature = "hydrate")]
    event_source::open(url, connection, std::rc::Rc::new(move |s| on_message(s).is_some()));
}

#[cfg(feature = "hydrate")]
mod event_source {
    use super::Connection;
    use leptos::prelude::*;
    use std::rc::Rc;
    use wasm_bindgen::{prelude::Closure, JsCast};
    use web_sys::{EventSource, MessageEvent};

    pub fn open(url: &'static str, connection: RwSignal<Connection>, on_message: Rc<dyn Fn(String) -> bool>) {
        let Ok(source) = EventSource::new(url) else {
            retry(url, connection, on_message);
            return;
        };
        let onopen = Closure::<dyn FnMut()>::new(move || {
            connection.try_set(Connection::Live);
        });
        let src = source.clone();
        let handler = on_message.clone();
        let onmessage = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            let alive = ev.data().as_string().is_none_or(|text| handler(text));
            if !alive {
                src.close();
            }
        });
        let src = source.clone();
        let onerror = Closure::<dyn FnMut()>::new(move || {
            if connection.try_set(Connection::Reconnecting).is_some() {
                src.close();
            } else if src.ready_state() == EventSource::CLOSED {
                retry(url, connection, on_message.clone());
            }
        });
        source.set_onopen(Some(onopen.as_ref().unchecked_ref()));
        source.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
        source.set_onerror(Some(onerror.as_ref().unchecked_ref()));
        // The callbacks live as long as the connection; a reconnect makes new ones.
        onopen.forget();
        onmessage.forget();
        onerror.forget();
    }

    fn retry(url: &'static str, connection: RwSignal<Connection>, on_message: Rc<dyn Fn(String) -> bool>) {
        set_timeout(move || open(url, connection, on_message), std::time::Duration::from_secs(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picker_text_round_trips_in_utc_on_the_server() {
        let t: chrono::DateTime<chrono::Utc> = "2026-11-26T10:30:00Z".parse().unwrap();
        assert_eq!(local_input(t), "2026-11-26T10:30");
        assert_eq!(local_time(t + chrono::Duration::seconds(5)), "2026-11-26 10:30:05 (UTC+00:00)");
        assert_eq!(from_local_input("2026-11-26T10:30"), Some(t));
        for bad in ["", "2026-11-26", "2026-13-01T10:00", "2026-11-26T25:00", "x-y-zT1:2"] {
            assert_eq!(from_local_input(bad), None, "{bad}");
        }
    }
}
