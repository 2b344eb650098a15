//! The Redis layout's version. What a sale's keys hold and how they are split (the key
//! table in `layout.rs`, the scripts, the formats) is one layout, numbered
//! [`LAYOUT_VERSION`]; warm-up writes it into every sale's window (`layout`), so the
//! keys say which build's layout they are in. A build that changes the layout raises
//! the number. An older build meeting a sale of a newer layout decides none of its
//! grabs (the gate answers `layout:<n>`) and overwrites none of its keys (warm-up
//! fails with `LAYOUT <n>`): it answers `unavailable` for that sale, says so once in
//! its log, and `/readyz` answers 503 saying why, so a balancer sends the traffic to
//! the processes that speak it (upgrading: `docs/operations.md#upgrading`). A window
//! without `layout` was written before the number existed, in layout 1. A sale met in
//! an older layout is not held: the gate answers `unknown_voucher`, a stock change
//! finds it missing, warm-up does not count it whole, and each rebuilds it from the
//! database in this layout.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex,
    },
};

/// The layout this build speaks. 2: `buyers` is a hash, each shopper's order id (it
/// was a set), so a grab sent again learns the order it holds.
pub const LAYOUT_VERSION: u32 = 2;

/// The most sales a process names in `/readyz` (more are counted).
const SALES_NAMED: usize = 16;

/// The sales this process met in a layout newer than it speaks, and in which.
#[derive(Default)]
pub struct NewerLayouts {
    /// Whether any is held: every grab asks, and one load answers.
    any: AtomicBool,
    sales: Mutex<BTreeMap<i64, u32>>,
}

impl NewerLayouts {
    /// `voucher_id`'s sale is in layout `theirs`, newer than this build's: logged the
    /// first time, then held for `/readyz`.
    pub fn met(&self, voucher_id: i64, theirs: u32) {
        let mut sales = self.sales.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if sales.insert(voucher_id, theirs).is_none() {
            tracing::error!(
                voucher_id,
                layout = theirs,
                speaks = LAYOUT_VERSION,
                "Redis holds this sale in a newer layout than this build speaks: it decides none of its grabs \
                 and writes none of its keys; upgrade this process (docs/operations.md#upgrading)"
            );
        }
        self.any.store(true, Ordering::Release);
    }

    /// `voucher_id`'s sale answered in this build's layout (it was warmed again).
    pub fn spoken(&self, voucher_id: i64) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        let mut sales = self.sales.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        sales.remove(&voucher_id);
        self.any.store(!sales.is_empty(), Ordering::Release);
    }

    /// Why this process should not get traffic, if it met such a sale.
    pub fn why(&self) -> Option<String> {
        let sales = self.sales.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let newest = sales.values().max()?;
        let named: Vec<String> = sales.keys().take(SALES_NAMED).map(i64::to_string).collect();
        let more = sales.len().saturating_sub(SALES_NAMED);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        Some(format!(
            "Redis holds sales in layout {newest}, newer than this build speaks ({LAYOUT_VERSION}): vouchers {}{more}; \
             upgrade this process",
            named.join(", ")
        ))
    }
}

/// The newer layout a script's refusal names (`LAYOUT <n>`), if that is what it is.
pub fn refused_layout(e: &redis::RedisError) -> Option<u32> {
    (e.code() == Some("LAYOUT")).then(|| e.detail()?.trim().parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sale_met_in_a_newer_layout_is_held_until_it_answers_in_this_one() {
        let newer = NewerLayouts::default();
        assert_eq!(newer.why(), None);
        newer.met(42, LAYOUT_VERSION + 1);
        newer.met(43, LAYOUT_VERSION + 1);
        assert!(newer.why().is_some_and(|why| why.contains("vouchers 42, 43")), "{:?}", newer.why());
        newer.spoken(42);
        newer.spoken(43);
        assert_eq!(newer.why(), None);
    }
}
