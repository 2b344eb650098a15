//! The gate (`lua/grab.lua`): decides the grabs of one sale that arrived together,
//! each in one atomic Redis step, in one call. This module owns the script's
//! interface: what it is handed and what its answers mean. `batches` gathers the
//! grabs.

pub use crate::backend::layout::Bucket;
use crate::orders::{entry, results::StoredResult};
use crate::{
    backend::{
        layout::{clock_key, SaleKeys},
        layout_version::LAYOUT_VERSION,
        Backend, ScriptCall,
    },
    bus::SaleEvent,
    error::ErrorCode,
};
use redis::RedisResult;

/// What the gate decided for one grab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Granted,
    Refused(ErrorCode),
    /// Refused: the shopper holds this order of the sale already.
    Bought(i64),
    /// Nothing yet: the shopper's bucket has no unit left, and the sale has other
    /// buckets (units move to it, `sale::refill`; then the grab is asked again).
    Dry,
    /// Nothing: the sale has this many shards, not the count it was asked with (the
    /// grab is asked again in the shopper's bucket of that many).
    Shards(u32),
    /// Nothing: the sale is in this Redis layout, newer than this build speaks
    /// (`backend::layout_version`).
    Layout(u32),
}

impl Verdict {
    /// The script answers `granted`, `dry`, `shards:<count>`, `layout:<layout>`,
    /// `already_bought:<order id>` or the refusal's API error code by name.
    fn from_reply(reply: &str) -> Self {
        fn after<T: std::str::FromStr>(reply: &str, prefix: &str) -> Option<T> {
            reply.strip_prefix(prefix)?.parse().ok()
        }
        match reply {
            "granted" => Self::Granted,
            "dry" => Self::Dry,
            _ => match (after(reply, "shards:"), after(reply, "layout:"), after(reply, "already_bought:")) {
                (Some(shards), ..) => Self::Shards(shards),
                (_, Some(layout), _) => Self::Layout(layout),
                (.., Some(order)) => Self::Bought(order),
                _ => Self::Refused(ErrorCode::from_name(reply).unwrap_or(ErrorCode::Internal)),
            },
        }
    }
}

/// The gate's clock (Unix ms): Redis TIME on the node that holds `voucher_id`'s sale
/// (the clock its grabs are decided by), or on the node [`clock_key`] falls on.
pub async fn clock(backend: &Backend, voucher_id: Option<i64>) -> RedisResult<i64> {
    let key = match voucher_id {
        Some(id) => backend.keys(id).window.clone(),
        None => clock_key(&backend.namespace),
    };
    backend.scripts.clock.key(key).invoke_async(&mut backend.redis.clone()).await
}

/// A shopper's grab token for a sale (`lua/token.lua`), from its start instant on by
/// the gate's clock; before it, the refusal (`not_started`, or `unknown_voucher`,
/// `ended`).
pub async fn token(backend: &Backend, voucher_id: i64, user_id: i64) -> RedisResult<Result<String, ErrorCode>> {
    let keys = backend.keys(voucher_id);
    let reply: String = backend
        .scripts
        .token
        .key(&keys.window)
        .arg(user_id)
        .arg(voucher_id)
        .invoke_async(&mut backend.redis.clone())
        .await?;
    Ok(match ErrorCode::from_name(&reply) {
        Some(code) => Err(code),
        None => Ok(reply),
    })
}

/// Counts `n` grabs of a bucket of a sale refused outside the gate (`lua/refused.lua`)
/// on the refusals counter the gate keeps, so the dashboard's figure holds every
/// refusal of the gate's making: a dry bucket's grabs that its refill found sold out.
pub async fn count_refused(backend: &Backend, sale: &SaleKeys, n: u32) -> RedisResult<()> {
    let mut call = backend.scripts.refused.key(&sale.refused);
    call.key(&sale.window).arg(n);
    call.invoke_async::<i64>(&mut backend.redis.clone()).await.map(drop)
}

/// One grab for the gate: who, the order id it gets if granted, and the shopper's
/// grab token (empty when none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ask {
    pub user_id: i64,
    pub order_id: i64,
    pub token: String,
}

/// Runs the gate on one grab: one round trip decides and, if granted, queues the order.
pub async fn grab(
    backend: &Backend,
    sale: &SaleKeys,
    (voucher_id, user_id, order_id): (i64, i64, i64),
    token: &str,
) -> RedisResult<Verdict> {
    let ask = Ask { user_id, order_id, token: token.to_owned() };
    let shards = backend.known_shards(voucher_id).unwrap_or(1);
    let mut verdicts = grab_all(backend, sale, (voucher_id, shards), &[&ask]).await?;
    verdicts.pop().ok_or_else(|| (redis::ErrorKind::TypeError, "the gate answered no grab").into())
}

/// Runs the gate on grabs of one bucket of a sale of `shards` (`sale`: the bucket's
/// keys): one round trip decides each, in order, and queues the orders granted. One
/// verdict per grab.
pub async fn grab_all(
    backend: &Backend,
    sale: &SaleKeys,
    (voucher_id, shards): (i64, u32),
    asks: &[&Ask],
) -> RedisResult<Vec<Verdict>> {
    let keys = [&*sale.left, &sale.buyers, &sale.window, &sale.orders, &sale.results, &sale.refused];
    // Each grab's four arguments take about 110 bytes; the call's own, 60 besides the
    // channel's name.
    let bytes = 60 + backend.events_channel.len() + 110 * asks.len();
    let mut call = ScriptCall::new(&backend.scripts.grab, &keys, 5 + 4 * asks.len(), bytes);
    entry::gate_voucher(&mut call, voucher_id).arg(&*backend.events_channel).arg(SaleEvent::SoldOut { voucher_id });
    call.arg(shards).arg(LAYOUT_VERSION);
    for ask in asks {
        entry::gate_grab(&mut call, ask.user_id, ask.order_id)
            .arg(StoredResult::Queued { user_id: ask.user_id }.encode())
            .arg(&ask.token);
    }
    let replies: Vec<String> = call.invoke(&mut backend.redis.clone()).await?;
    if replies.len() != asks.len() {
        return Err((redis::ErrorKind::TypeError, "the gate answered a different number of grabs").into());
    }
    Ok(replies.iter().map(|r| Verdict::from_reply(r)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_api_error_codes() {
        assert_eq!(Verdict::from_reply("granted"), Verdict::Granted);
        assert_eq!(Verdict::from_reply("sold_out"), Verdict::Refused(ErrorCode::SoldOut));
        assert_eq!(Verdict::from_reply("already_bought"), Verdict::Refused(ErrorCode::AlreadyBought));
        assert_eq!(Verdict::from_reply("already_bought:4242"), Verdict::Bought(4242));
        assert_eq!(Verdict::from_reply("what"), Verdict::Refused(ErrorCode::Internal));
        assert_eq!(Verdict::from_reply("dry"), Verdict::Dry);
        assert_eq!(Verdict::from_reply("shards:3"), Verdict::Shards(3));
        assert_eq!(Verdict::from_reply("shards:x"), Verdict::Refused(ErrorCode::Internal));
        assert_eq!(Verdict::from_reply("layout:2"), Verdict::Layout(2));
    }

    /// Every refusal the script gives for a sale it holds is one of a grab's answers
    /// (`report::Outcome`: the report's columns and the metric's labels);
    /// `unknown_voucher` is a sale it lacks, which the grab looks up before answering.
    #[test]
    fn the_scripts_refusals_are_grab_answers() {
        let script = include_str!("../../lua/grab.lua");
        let refusals: Vec<&str> = script.split("refuse('").skip(1).filter_map(|rest| rest.split('\'').next()).collect();
        assert!(refusals.len() >= 6, "{refusals:?}");
        for reply in refusals {
            // A refusal that carries a value (`already_bought:` and the order id).
            let code = match Verdict::from_reply(&format!("{reply}{}", if reply.ends_with(':') { "1" } else { "" })) {
                Verdict::Refused(code) => code,
                Verdict::Bought(_) => ErrorCode::AlreadyBought,
                _ => panic!("{reply}"),
            };
            assert!(crate::report::Outcome::of_code(code).is_some(), "{reply} is not a grab's answer");
        }
    }
}
