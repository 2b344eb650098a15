//! The checker: judges the history and the final books (`books.rs`, read after the
//! quiet period), and names each broken promise with the operations involved. Then
//! availability: the share of grabs answered within 2 s, per fault kind under way
//! when they were made.

use crate::{
    books::{Final, OrderRow},
    history::{EvictingStart, Fault, FaultKind, Op, OpKind},
};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Every violation found, each with the operations involved.
pub fn violations(ops: &[Op], end: &Final, initial_stock: i64) -> Vec<String> {
    let mut found = Vec::new();
    let granted: Vec<&Op> = ops.iter().filter(|o| o.kind == OpKind::Grab && o.status == Some(200)).collect();
    // Each grant, and each order an `already_bought` named, ends the shopper's order or
    // a failure they read (a named order is followed with the receipt it came with).
    for grab in ops.iter().filter(|o| o.names_a_grant()) {
        let Some(order) = grab.order.as_deref() else {
            found.push(format!("a grab answered {:?} without an order id: {grab:?}", grab.status));
            continue;
        };
        let id: i64 = order.parse().unwrap_or_default();
        let row = end.orders.get(&id);
        match (end.results.get(order).map(String::as_str), row) {
            (Some("success"), Some(r)) if Some(r.user) == grab.user && r.voucher == grab.voucher => {}
            (Some("success"), r) => {
                found.push(format!("order {order} reads success but the database has {r:?}: {grab:?}"))
            }
            (Some(s), None) if s.starts_with("failed") => {}
            (Some(s), Some(r)) if s.starts_with("failed") => {
                found.push(format!("order {order} reads {s} but the database has it {}: {grab:?}", r.status))
            }
            (s, _) => found
                .push(format!("order {order} answered queued ends as {s:?}, neither an order nor a failure: {grab:?}")),
        }
    }
    found.extend(one_grant_per_order_id(&granted));
    found.extend(results_never_change(ops));
    found.extend(books(end, initial_stock, ops));
    found.extend(sold_out_while_unsold(ops, end));
    for op in ops {
        if let Some(status) = op.status.filter(|s| *s >= 500 && *s != 503) {
            found.push(format!("a {status} answer (only 503 may come from a fault): {op:?}"));
        }
        let status = op.order.as_deref().and_then(|o| o.parse::<i64>().ok()).and_then(|id| end.orders.get(&id));
        match (op.kind, op.status, status) {
            (OpKind::Pay, Some(200), Some(r)) if r.status != "paid" => {
                found.push(format!("a payment answered 200 but the order is {}: {op:?}", r.status))
            }
            (OpKind::Cancel, Some(200), Some(r)) if r.status != "cancelled" => {
                found.push(format!("a cancel answered 200 but the order is {}: {op:?}", r.status))
            }
            (OpKind::Pay | OpKind::Cancel, Some(200), None) => {
                found.push(format!("a payment or cancel answered 200 for an order the database lacks: {op:?}"))
            }
            // Refused as past its deadline, answered before the deadline came (a clock
            // running fast somewhere): the same machine's clock on both sides.
            (OpKind::Pay, Some(409), Some(r)) if op.code == "order_expired" && op.answered_at + 50 < r.pay_deadline => {
                found.push(format!(
                    "a payment refused as expired {} ms before the deadline: {op:?}",
                    r.pay_deadline - op.answered_at
                ))
            }
            _ => {}
        }
    }
    found
}

/// Each order id was granted once (the workload sends each grab once, and a refused
/// grab's id is taken again only in a later second: another id). Two grants of one id
/// come from a failover handing out again blocks of ids its master gave out: with
/// replicas required, only blocks used while no replica held them (`order_ids`).
fn one_grant_per_order_id(granted: &[&Op]) -> Vec<String> {
    let mut first: HashMap<&str, &Op> = HashMap::new();
    let mut found = Vec::new();
    for grab in granted {
        let Some(order) = grab.order.as_deref() else { continue };
        if let Some(earlier) = first.insert(order, grab) {
            found.push(format!("order id {order} granted twice: {earlier:?} and {grab:?}"));
        }
    }
    found
}

/// An app never runs on a Redis that may evict a sale's keys: each start while a node
/// was set to evict was refused, saying which policy to set.
pub fn evicting_starts(starts: &[EvictingStart]) -> Vec<String> {
    starts
        .iter()
        .filter_map(|start| match &start.refused {
            None => Some(format!("{} started while {} may evict keys (volatile-lru)", start.app, start.node)),
            Some(why) if !why.contains("maxmemory-policy noeviction") => Some(format!(
                "{} refused to start while {} may evict keys, but did not say to set noeviction: {why}",
                start.app, start.node
            )),
            Some(_) => None,
        })
        .collect()
}

/// What a shopper the two stores disagree on did in sale `voucher`: whether Redis
/// holds them as a buyer, their orders in the database, and their calls.
fn shopper_story(user: i64, voucher: i64, redis_buyer: bool, orders: &[(&i64, &OrderRow)], ops: &[Op]) -> String {
    let rows: Vec<String> =
        orders.iter().filter(|(_, o)| o.user == user).map(|(id, o)| format!("{id} {}", o.status)).collect();
    let calls: Vec<String> = ops
        .iter()
        .filter(|o| o.user == Some(user) && o.voucher == voucher)
        .map(|o| format!("{:?}@{}ms:{:?} {} {:?}", o.kind, o.invoked, o.status, o.code, o.order))
        .collect();
    format!(
        "shopper {user} (Redis buyer: {redis_buyer}; database orders: [{}]; calls: [{}])",
        rows.join(", "),
        calls.join(", ")
    )
}

/// Once a grab's result is decided (success or failed), it never reads otherwise.
fn results_never_change(ops: &[Op]) -> Vec<String> {
    let mut decided: HashMap<&str, &Op> = HashMap::new();
    let mut found = Vec::new();
    let mut polls: Vec<&Op> = ops.iter().filter(|o| o.kind == OpKind::Result && o.status == Some(200)).collect();
    polls.sort_by_key(|o| o.answered);
    for poll in polls {
        let (Some(order), status) = (poll.order.as_deref(), poll.code.split(':').next().unwrap_or_default()) else {
            continue;
        };
        if status == "queued" {
            if let Some(first) = decided.get(order) {
                found.push(format!("order {order} read {} then queued again: {first:?} then {poll:?}", first.code));
            }
            continue;
        }
        match decided.get(order) {
            Some(first) if first.code.split(':').next() != Some(status) => {
                found.push(format!("order {order} read {} then {}: {first:?} then {poll:?}", first.code, poll.code))
            }
            Some(_) => {}
            None => {
                decided.insert(order, poll);
            }
        }
    }
    found
}

/// No `sold_out` answered while the sale had units unsold, by the final books: units
/// unsold when a grab was refused are at least those unsold at the end, less every unit
/// that could have come back since (each cancelled order's, each failed grant's, all
/// of them whenever they came) and every unit an operator may have added since. More
/// unsold at the end than that, and the refusal was wrong.
fn sold_out_while_unsold(ops: &[Op], end: &Final) -> Vec<String> {
    let mut found = Vec::new();
    for v in &end.vouchers {
        let cancelled = end.orders.values().filter(|o| o.voucher == v.id && o.status == "cancelled").count() as i64;
        // Each failed order once, known by its grant or by an `already_bought` naming it
        // (its grant's answer lost).
        let failed = ops
            .iter()
            .filter(|o| o.voucher == v.id && o.names_a_grant())
            .filter_map(|o| o.order.as_deref())
            .filter(|id| end.results.get(*id).is_some_and(|r| r.starts_with("failed")))
            .collect::<HashSet<_>>()
            .len() as i64;
        let refused = ops.iter().filter(|o| o.kind == OpKind::Grab && o.voucher == v.id && o.code == "sold_out");
        for refusal in refused {
            // An addition answered before the refusal was asked had been made by then.
            let added_since: i64 = ops
                .iter()
                .filter(|o| o.voucher == v.id && (o.status != Some(200) || o.answered >= refusal.invoked))
                .map(|o| if let OpKind::AddStock(n) = o.kind { n } else { 0 })
                .sum();
            if v.stock_left > cancelled + failed + added_since {
                found.push(format!(
                    "sale {}: sold_out answered with units unsold ({} left at the end; at most {} came back or were added since): {refusal:?}",
                    v.id,
                    v.stock_left,
                    cancelled + failed + added_since
                ));
                break;
            }
        }
    }
    found
}

/// Each sale's books: no oversell, one live order per shopper, Redis and the database
/// conserving every unit, each cancelled unit back once, overdue orders swept, paid
/// ones paid in time, no give-back or stock change owed.
fn books(end: &Final, initial_stock: i64, ops: &[Op]) -> Vec<String> {
    let mut found = Vec::new();
    for v in &end.vouchers {
        let orders: Vec<(&i64, &OrderRow)> = end.orders.iter().filter(|(_, o)| o.voucher == v.id).collect();
        let live: Vec<&OrderRow> = orders.iter().map(|(_, o)| *o).filter(|o| o.status != "cancelled").collect();
        let cancelled: HashSet<i64> =
            orders.iter().filter(|(_, o)| o.status == "cancelled").map(|(id, _)| **id).collect();
        let mut holders: BTreeMap<i64, usize> = BTreeMap::new();
        for o in &live {
            *holders.entry(o.user).or_default() += 1;
        }
        for (user, n) in holders.iter().filter(|(_, n)| **n > 1) {
            found.push(format!("sale {}: shopper {user} holds {n} live orders", v.id));
        }
        if live.len() as i64 > v.stock || v.stock_left < 0 {
            found.push(format!(
                "sale {}: oversold: {} live orders of {} units, {} left",
                v.id,
                live.len(),
                v.stock,
                v.stock_left
            ));
        }
        if v.stock_left + live.len() as i64 != v.stock {
            found.push(format!(
                "sale {}: database books off: {} left + {} live orders != {} units",
                v.id,
                v.stock_left,
                live.len(),
                v.stock
            ));
        }
        let live_buyers: HashSet<i64> = live.iter().map(|o| o.user).collect();
        if v.redis_stock != Some(v.stock_left) || v.buyers != live_buyers {
            let differ: Vec<String> = v
                .buyers
                .symmetric_difference(&live_buyers)
                .map(|user| shopper_story(*user, v.id, v.buyers.contains(user), &orders, ops))
                .collect();
            found.push(format!(
                "sale {}: Redis off the database: stock {:?} (database {}), {} buyers (database {} live orders); {}",
                v.id,
                v.redis_stock,
                v.stock_left,
                v.buyers.len(),
                live_buyers.len(),
                differ.join("; ")
            ));
        }
        if v.given_back != cancelled {
            found.push(format!(
                "sale {}: cancelled units given back in Redis {} times for {} cancelled orders",
                v.id,
                v.given_back.len(),
                cancelled.len()
            ));
        }
        for (id, o) in &orders {
            if o.status == "unpaid" && o.pay_deadline + 2_000 < end.db_now {
                found.push(format!(
                    "sale {}: order {id} unpaid {} ms past its deadline",
                    v.id,
                    end.db_now - o.pay_deadline
                ));
            }
            if o.status == "paid" && o.paid_at.is_some_and(|at| at >= o.pay_deadline) {
                found.push(format!("sale {}: order {id} paid after its deadline", v.id));
            }
            if let Some(at) = o.timed_out_at.filter(|at| *at < o.pay_deadline) {
                found.push(format!(
                    "sale {}: order {id} cancelled for its deadline {} ms before it",
                    v.id,
                    o.pay_deadline - at
                ));
            }
        }
        let changes: Vec<&Op> = ops
            .iter()
            .filter(|o| o.voucher == v.id && matches!(o.kind, OpKind::AddStock(_) | OpKind::Withdraw(_)))
            .collect();
        // Only when every change was answered for sure: a change answered 503 or not
        // at all may or may not have been made.
        if changes.iter().all(|o| o.status.is_some_and(|s| s < 500)) {
            let expected = changes.iter().fold(initial_stock, |units, o| match (o.kind, o.status) {
                (OpKind::AddStock(n), Some(200)) => units + n,
                (OpKind::Withdraw(n), Some(200)) => units - n,
                _ => units,
            });
            if expected != v.stock {
                found.push(format!(
                    "sale {}: {} units after the operators' changes answered, the database says {}",
                    v.id, expected, v.stock
                ));
            }
        }
    }
    if end.changes_owed > 0 {
        found.push(format!("{} stock changes still owed to Redis", end.changes_owed));
    }
    if end.owed > 0 {
        found.push(format!("{} give-backs or settlings still owed to Redis", end.owed));
    }
    found
}

/// How long after its sign-out was answered a session may still be served with no
/// fault under way: every process reads the ended sessions twice a second
/// (`auth::REVOCATIONS_READ_EVERY`); the rest is room for a machine running the storm.
const ENDED_WITHIN_MS: u64 = 5_000;
/// The same under a fault: a process that cannot read the database honours its copy
/// for 30 s (`auth::ended_sessions::STALE_AFTER`), then no session at all.
const ENDED_WITHIN_UNDER_FAULT_MS: u64 = 32_000;

/// Every signed-out session ends everywhere (a sign-out answered 200 is made): a
/// probe with its cookie served (200) later than the bound after the sign-out's
/// answer is a violation; [`ENDED_WITHIN_UNDER_FAULT_MS`] when a fault was under way
/// from the sign-out to the probe's answer, else [`ENDED_WITHIN_MS`]. With the
/// violations, the latest a probe was served with no fault under way (ms after).
pub fn signed_out_sessions_end(ops: &[Op], faults: &[Fault]) -> (Vec<String>, Option<u64>) {
    let (mut found, mut slowest_quiet) = (Vec::new(), None);
    let outs: Vec<&Op> = ops.iter().filter(|o| o.kind == OpKind::SignOut && o.status == Some(200)).collect();
    for probe in ops.iter().filter(|o| o.kind == OpKind::Probe && o.status == Some(200)) {
        // The leaver's session signed out last before the probe: the one it probes.
        let out =
            outs.iter().filter(|o| o.user == probe.user && o.answered <= probe.invoked).max_by_key(|o| o.answered);
        let Some(out) = out else { continue };
        let after = probe.answered.saturating_sub(out.answered);
        let under = faults.iter().any(|f| f.start <= probe.answered && out.invoked <= f.end);
        if !under {
            slowest_quiet = slowest_quiet.max(Some(after));
        }
        let bound = if under { ENDED_WITHIN_UNDER_FAULT_MS } else { ENDED_WITHIN_MS };
        if after > bound {
            found
                .push(format!("a session signed out {after} ms before was served on app {}: {probe:?}", probe.process));
        }
    }
    (found, slowest_quiet)
}

/// The longest a running process's live feed may go without a snapshot: the sampler
/// sends one every 250 ms, and a round waits at most 1 s for the database and 1 s for
/// Redis; the rest is room for a busy machine.
const FEED_SILENT_MS: u64 = 5_000;
/// After a fault on a process heals (started again, continued), the time its feed
/// is given to be opened again and speak.
const FEED_BACK_MS: u64 = 2_000;

/// Each process's live feed keeps coming, whatever else is down: between `from` and
/// `until` (ms since the start), a stretch longer than [`FEED_SILENT_MS`] with no
/// snapshot from process `p` is a violation, unless a fault on that process itself
/// (killed, stopped, started again) covers it. With the violations, the longest such
/// stretch found (ms).
pub fn feed_keeps_coming(
    snapshots: &[(usize, u64)],
    faults: &[Fault],
    processes: usize,
    (from, until): (u64, u64),
) -> (Vec<String>, u64) {
    let (mut found, mut longest) = (Vec::new(), 0);
    for p in 0..processes {
        let name = format!("app-{}", p + 1);
        let own: Vec<(u64, u64)> =
            faults.iter().filter(|f| f.target == name).map(|f| (f.start, f.end + FEED_BACK_MS)).collect();
        let mut times: Vec<u64> = snapshots.iter().filter(|s| s.0 == p).map(|s| s.1.clamp(from, until)).collect();
        times.extend([from, until]);
        times.sort_unstable();
        for pair in times.windows(2) {
            let silent = uncovered(pair[0], pair[1], &own);
            longest = longest.max(silent);
            if silent > FEED_SILENT_MS {
                found.push(format!(
                    "{name}'s live feed sent no snapshot for {silent} ms between {} and {} ms with no fault of its own under way",
                    pair[0], pair[1]
                ));
            }
        }
    }
    (found, longest)
}

/// The longest stretch of `[a, b]` that none of `covers` overlaps.
fn uncovered(a: u64, b: u64, covers: &[(u64, u64)]) -> u64 {
    let mut covers: Vec<(u64, u64)> = covers.iter().filter(|c| c.0 < b && a < c.1).copied().collect();
    covers.sort_unstable();
    let (mut at, mut longest) = (a, 0);
    for (start, end) in covers {
        longest = longest.max(start.saturating_sub(at));
        at = at.max(end);
    }
    longest.max(b.saturating_sub(at))
}

/// Grabs, and those answered within 2 s, by the fault kind under way.
pub type Availability = BTreeMap<String, (usize, usize)>;
/// The slowest grant to its order's saving (ms), under a fault kind and after it.
pub type Saving = BTreeMap<String, [Option<i64>; 2]>;

/// Per fault kind under way when a grab was made (and "none"): grabs, and the share
/// answered (anything but 503 or no answer) within 2 s.
pub fn availability(ops: &[Op], faults: &[Fault]) -> Availability {
    let mut by = Availability::new();
    for grab in ops.iter().filter(|o| o.kind == OpKind::Grab) {
        let ok = grab.status.is_some_and(|s| s != 503) && grab.took() <= 2_000;
        let under: HashSet<FaultKind> = faults
            .iter()
            .filter(|f| f.start <= grab.invoked && grab.invoked <= f.end.max(f.start + 1_000))
            .map(|f| f.kind)
            .collect();
        let names: Vec<String> = if under.is_empty() {
            vec!["none".to_owned()]
        } else {
            under.iter().map(|k| k.name().to_owned()).collect()
        };
        for name in names {
            let entry = by.entry(name).or_default();
            entry.0 += 1;
            entry.1 += usize::from(ok);
        }
    }
    by
}

/// How long granted orders took to be saved, per fault kind: the slowest from a
/// grant's answer to its order's saving, among grants answered while the fault was
/// under way, and among those answered in the 10 s after it healed ("none": grants
/// answered under no fault). An order's saving is read from its pay deadline (set
/// when it is saved: then + the time to pay), unless its grant's own second set it.
pub fn saving(ops: &[Op], faults: &[Fault], end: &Final, pay_timeout_ms: i64) -> Saving {
    let mut by = Saving::new();
    for grab in ops.iter().filter(|o| o.kind == OpKind::Grab && o.status == Some(200)) {
        let Some(id) = grab.order.as_deref().and_then(|o| o.parse::<i64>().ok()) else { continue };
        let Some(order) = end.orders.get(&id) else { continue };
        let saved_at = order.pay_deadline - pay_timeout_ms;
        if seckill::testing::decompose(id).0.timestamp_millis() >= saved_at {
            continue;
        }
        let took = (saved_at - grab.answered_at).max(0);
        let mut slowest = |name: &str, after: bool| {
            let slot = &mut by.entry(name.to_owned()).or_default()[usize::from(after)];
            *slot = Some(slot.unwrap_or(0).max(took));
        };
        let mut under = false;
        for f in faults {
            if f.start <= grab.answered && grab.answered <= f.end {
                under = true;
                slowest(f.kind.name(), false);
            } else if f.end < grab.answered && grab.answered <= f.end + 10_000 {
                slowest(f.kind.name(), true);
            }
        }
        if !under {
            slowest("none", false);
        }
    }
    by
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::books::VoucherState;

    fn op(kind: OpKind, status: u16, code: &str, order: &str, at: u64) -> Op {
        Op {
            kind,
            process: 0,
            user: Some(7),
            voucher: 1,
            invoked: at,
            answered: at + 5,
            answered_at: at as i64 + 5,
            status: Some(status),
            code: code.to_owned(),
            order: Some(order.to_owned()),
            receipt: None,
        }
    }

    /// A sale of 2 units, one sold to shopper 7 (order 100), books balanced.
    fn balanced() -> Final {
        let order = OrderRow {
            voucher: 1,
            user: 7,
            status: "paid".into(),
            pay_deadline: 10_000,
            paid_at: Some(5_000),
            timed_out_at: None,
        };
        Final {
            vouchers: vec![VoucherState {
                id: 1,
                stock: 2,
                stock_left: 1,
                redis_stock: Some(1),
                buyers: [7].into(),
                given_back: HashSet::new(),
            }],
            orders: [(100, order)].into(),
            owed: 0,
            changes_owed: 0,
            db_now: 20_000,
            results: [("100".to_owned(), "success".to_owned())].into(),
            undrained: Vec::new(),
        }
    }

    #[test]
    fn a_signed_out_session_served_past_its_bound_is_named() {
        let out = op(OpKind::SignOut, 200, "ok", "", 1_000);
        let probe = |status, at| op(OpKind::Probe, status, "ok", "", at);
        let ops = [out.clone(), probe(200, 2_000), probe(401, 9_000)];
        assert_eq!(signed_out_sessions_end(&ops, &[]), (vec![], Some(1_000)), "served soon after: no violation");
        let late = [out.clone(), probe(200, 9_000)];
        let (found, _) = signed_out_sessions_end(&late, &[]);
        assert_eq!(found.len(), 1, "served 8 s after with no fault: {found:?}");
        let cut = Fault { kind: FaultKind::LinkCut, target: "db".into(), start: 500, end: 20_000 };
        assert_eq!(
            signed_out_sessions_end(&late, std::slice::from_ref(&cut)),
            (vec![], None),
            "under a fault, within 32 s"
        );
        let (found, _) = signed_out_sessions_end(&[out.clone(), probe(200, 40_000)], &[cut]);
        assert_eq!(found.len(), 1, "under a fault, past 32 s: {found:?}");
        let unanswered = Op { status: None, ..out };
        assert_eq!(signed_out_sessions_end(&[unanswered, probe(200, 9_000)], &[]), (vec![], None), "not signed out");
    }

    #[test]
    fn the_slowest_saving_is_told_per_fault_under_way_and_after() {
        let secs = 1_800_000_000;
        let id = seckill::testing::compose(secs, 1);
        let mut end = balanced();
        let mut order = end.orders.remove(&100).unwrap();
        // Saved 700 ms into its grant's second, with 6 s to pay.
        order.pay_deadline = secs * 1000 + 700 + 6_000;
        end.orders.insert(id, order);
        let mut grab = op(OpKind::Grab, 200, "queued", &id.to_string(), 3_000);
        grab.answered_at = secs * 1000 + 200;
        let cut = |start, end| Fault { kind: FaultKind::LinkCut, target: "app-1→redis".into(), start, end };
        let under = saving(std::slice::from_ref(&grab), &[cut(2_000, 4_000)], &end, 6_000);
        assert_eq!(under["link cut"], [Some(500), None]);
        let after = saving(std::slice::from_ref(&grab), &[cut(0, 1_000)], &end, 6_000);
        assert_eq!((after["link cut"], after["none"]), ([None, Some(500)], [Some(500), None]));
    }

    #[test]
    fn sold_out_while_units_were_unsold_is_named() {
        let sold_out = op(OpKind::Grab, 409, "sold_out", "", 30);
        let found = sold_out_while_unsold(std::slice::from_ref(&sold_out), &balanced());
        assert!(found[0].contains("sold_out answered with units unsold"), "{found:?}");
        // A unit an operator added after it was asked may be the one left.
        let added = op(OpKind::AddStock(1), 200, "", "", 40);
        assert!(sold_out_while_unsold(&[sold_out.clone(), added], &balanced()).is_empty());
        // So may a cancelled order's, whenever it came back.
        let mut cancelled = balanced();
        cancelled.orders.get_mut(&100).unwrap().status = "cancelled".into();
        assert!(sold_out_while_unsold(&[sold_out], &cancelled).is_empty());
    }

    #[test]
    fn two_reads_agree_only_on_the_same_books() {
        assert!(balanced().same_books(&balanced()));
        let mut timed_out = balanced();
        timed_out.orders.get_mut(&100).unwrap().status = "cancelled".into();
        assert!(!balanced().same_books(&timed_out), "an order that changed between the reads");
        let mut given_back = balanced();
        given_back.vouchers[0].given_back.insert(100);
        assert!(!balanced().same_books(&given_back), "a give-back made between the reads");
    }

    #[test]
    fn balanced_books_and_kept_answers_are_no_violation() {
        let ops = [op(OpKind::Grab, 200, "queued", "100", 0), op(OpKind::Pay, 200, "paid", "100", 10)];
        assert_eq!(violations(&ops, &balanced(), 2), Vec::<String>::new());
    }

    #[test]
    fn each_broken_promise_is_named() {
        let grab = op(OpKind::Grab, 200, "queued", "100", 0);
        let mut stuck = balanced();
        stuck.results.insert("100".into(), "queued".into());
        assert!(violations(std::slice::from_ref(&grab), &stuck, 2)[0].contains("neither an order nor a failure"));
        let mut redis_off = balanced();
        redis_off.vouchers[0].redis_stock = Some(2);
        assert!(violations(std::slice::from_ref(&grab), &redis_off, 2)[0].contains("Redis off the database"));
        let mut oversold = balanced();
        oversold.vouchers[0].stock_left = -1;
        assert!(violations(std::slice::from_ref(&grab), &oversold, 2).iter().any(|v| v.contains("oversold")));
        let flip = [
            grab.clone(),
            op(OpKind::Result, 200, "failed:lost", "100", 10),
            op(OpKind::Result, 200, "success", "100", 20),
        ];
        assert!(violations(&flip, &balanced(), 2)[0].contains("read failed:lost then success"));
        let cancelled_after_paid = [grab.clone(), op(OpKind::Cancel, 200, "cancelled", "100", 10)];
        assert!(violations(&cancelled_after_paid, &balanced(), 2)[0]
            .contains("a cancel answered 200 but the order is paid"));
        let mut to_another = grab.clone();
        to_another.user = Some(8);
        let found = violations(&[grab.clone(), to_another], &balanced(), 2);
        assert_eq!(found.iter().filter(|v| v.contains("order id 100 granted twice")).count(), 1, "{found:?}");
        let crashed = [grab, op(OpKind::Pay, 500, "internal", "100", 10)];
        assert!(violations(&crashed, &balanced(), 2)[0].contains("a 500 answer"));
        let mut early = balanced();
        let order = early.orders.get_mut(&100).unwrap();
        (order.status, order.timed_out_at) = ("cancelled".into(), Some(9_000));
        let sold = early.vouchers.remove(0);
        early.vouchers.push(VoucherState {
            stock_left: 2,
            redis_stock: Some(2),
            buyers: HashSet::new(),
            given_back: [100].into(),
            ..sold
        });
        assert!(violations(&[], &early, 2)[0].contains("cancelled for its deadline 1000 ms before it"));
        let expired_early = op(OpKind::Pay, 409, "order_expired", "100", 100);
        assert!(violations(&[expired_early], &balanced(), 2)[0].contains("refused as expired"));
        let mut owed = balanced();
        owed.owed = 1;
        assert!(violations(&[], &owed, 2).iter().any(|v| v.contains("give-backs or settlings still owed")));
        let mut changes_owed = balanced();
        changes_owed.changes_owed = 1;
        assert!(violations(&[], &changes_owed, 2).iter().any(|v| v.contains("stock changes still owed")));
    }

    #[test]
    fn an_app_started_on_an_evicting_redis_is_a_violation() {
        let start = |refused: Option<&str>| EvictingStart {
            app: "app-1".into(),
            node: "redis".into(),
            refused: refused.map(str::to_owned),
        };
        let said = "Error: Redis may evict ... (redis: maxmemory-policy volatile-lru): set maxmemory-policy noeviction";
        assert_eq!(evicting_starts(&[start(Some(said))]), Vec::<String>::new());
        assert!(evicting_starts(&[start(None)])[0].contains("app-1 started while redis may evict keys"));
        assert!(evicting_starts(&[start(Some("binding: address in use"))])[0].contains("did not say"));
    }

    #[test]
    fn a_live_feed_silent_past_its_bound_is_named_unless_its_own_process_was_down() {
        let fault = |target: &str, start, end| Fault { kind: FaultKind::Kill, target: target.into(), start, end };
        let every = |p: usize, from: u64, to: u64| (from..to).step_by(250).map(move |t| (p, t));
        // Process 0 speaks to 10 s, then again from 20 s; process 1 all along.
        let snapshots: Vec<(usize, u64)> =
            every(0, 0, 10_000).chain(every(0, 20_000, 30_000)).chain(every(1, 0, 30_000)).collect();
        let (found, longest) = feed_keeps_coming(&snapshots, &[], 2, (0, 30_000));
        assert_eq!((found.len(), longest), (1, 10_250), "{found:?}");
        assert!(found[0].starts_with("app-1's"), "{found:?}");
        // Killed from 10 s to 19 s: covered, its 2 s to speak again included.
        let down = [fault("app-1", 10_000, 19_000)];
        assert_eq!(feed_keeps_coming(&snapshots, &down, 2, (0, 30_000)).0.len(), 0);
        // Another process's fault, or one that healed long before the feed spoke again, covers nothing.
        let elsewhere = [fault("app-2", 9_000, 21_000), fault("app-1", 10_000, 11_000)];
        assert_eq!(feed_keeps_coming(&snapshots, &elsewhere, 2, (0, 30_000)).0.len(), 1);
        // Silent from the start of the watch: named too.
        assert_eq!(feed_keeps_coming(&every(1, 0, 30_000).collect::<Vec<_>>(), &[], 2, (0, 30_000)).0.len(), 1);
    }

    #[test]
    fn availability_counts_grabs_by_the_faults_under_way() {
        let faults = [Fault { kind: FaultKind::Kill, target: "app-1".into(), start: 100, end: 200 }];
        let mut slow = op(OpKind::Grab, 200, "queued", "1", 150);
        slow.answered = 150 + 2_500;
        let ops = [op(OpKind::Grab, 503, "unavailable", "2", 120), slow, op(OpKind::Grab, 409, "sold_out", "3", 5_000)];
        let by = availability(&ops, &faults);
        assert_eq!(by["kill -9 + restart"], (2, 0));
        assert_eq!(by["none"], (1, 1));
    }
}
