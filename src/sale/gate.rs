//! The Lua scripts that change sale state, loaded once and run by SHA (`EVALSHA`,
//! with a transparent reload when Redis answers NOSCRIPT).

use super::keys::SaleKeys;
use crate::{error::ErrorCode, voucher::store::VoucherRow};
use redis::{aio::ConnectionManager, RedisResult, Script};

/// What the gate decided for one grab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Granted,
    Refused(ErrorCode),
}

impl Verdict {
    fn from_code(code: i64) -> Self {
        match code {
            0 => Self::Granted,
            1 => Self::Refused(ErrorCode::UnknownVoucher),
            2 => Self::Refused(ErrorCode::NotStarted),
            3 => Self::Refused(ErrorCode::Ended),
            4 => Self::Refused(ErrorCode::SoldOut),
            5 => Self::Refused(ErrorCode::AlreadyBought),
            _ => Self::Refused(ErrorCode::Internal),
        }
    }
}

/// An order to end without persisting it (see `lua/give_back.lua`).
pub struct GiveBack<'a> {
    pub order_id: i64,
    pub user_id: i64,
    pub voucher_id: i64,
    pub reason: &'a str,
    pub entry_id: &'a str,
    pub give_stock: bool,
    pub give_slot: bool,
    pub dead_letter: bool,
}

pub struct Scripts {
    grab: Script,
    warm: Script,
    give_back: Script,
    sample: Script,
    channel: String,
}

impl Scripts {
    pub fn new(namespace: &str) -> Self {
        Self {
            grab: Script::new(include_str!("../../lua/grab.lua")),
            warm: Script::new(include_str!("../../lua/warm.lua")),
            give_back: Script::new(include_str!("../../lua/give_back.lua")),
            sample: Script::new(include_str!("../../lua/sample.lua")),
            channel: super::keys::events_channel(namespace),
        }
    }

    /// Runs the gate: one round trip decides and, if granted, queues the order.
    pub async fn grab(
        &self,
        redis: &mut ConnectionManager,
        keys: &SaleKeys,
        voucher_id: i64,
        user_id: i64,
        order_id: i64,
    ) -> RedisResult<Verdict> {
        let code: i64 = self
            .grab
            .key(&keys.stock)
            .key(&keys.buyers)
            .key(&keys.window)
            .key(&keys.orders)
            .key(&keys.results)
            .key(&keys.refused)
            .arg(user_id)
            .arg(order_id)
            .arg(voucher_id)
            .arg(&self.channel)
            .invoke_async(redis)
            .await?;
        Ok(Verdict::from_code(code))
    }

    /// Loads a voucher unless Redis holds it; true when it loaded.
    pub async fn warm(
        &self,
        redis: &mut ConnectionManager,
        keys: &SaleKeys,
        v: &VoucherRow,
        buyers: &[i64],
    ) -> RedisResult<bool> {
        let mut call = self.warm.key(&keys.stock);
        call.key(&keys.buyers).key(&keys.window);
        call.arg(v.stock_left).arg(v.begins_at).arg(v.ends_at).arg(buyers);
        let loaded: i64 = call.invoke_async(redis).await?;
        Ok(loaded == 1)
    }

    /// Ends an order as failed and gives back what it held; false if already done.
    pub async fn give_back(
        &self,
        redis: &mut ConnectionManager,
        keys: &SaleKeys,
        g: &GiveBack<'_>,
    ) -> RedisResult<bool> {
        let mut flags = String::new();
        for (on, flag) in [(g.give_stock, 's'), (g.give_slot, 'b'), (g.dead_letter, 'd')] {
            if on {
                flags.push(flag);
            }
        }
        let acted: i64 = self
            .give_back
            .key(&keys.stock)
            .key(&keys.buyers)
            .key(&keys.results)
            .key(&keys.orders)
            .key(&keys.dlq)
            .arg(g.order_id)
            .arg(g.user_id)
            .arg(g.reason)
            .arg(g.entry_id)
            .arg(super::keys::GROUP)
            .arg(flags)
            .arg(&self.channel)
            .arg(g.voucher_id)
            .invoke_async(redis)
            .await?;
        Ok(acted == 1)
    }

    /// The live numbers of each voucher (see `lua/sample.lua`), in one pipelined
    /// round trip. Pipelines do not reload scripts by themselves: on NOSCRIPT the
    /// script is loaded and the pipeline sent once more.
    pub async fn sample(&self, redis: &mut ConnectionManager, keys: &[SaleKeys]) -> RedisResult<Vec<Vec<i64>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for k in keys {
            let mut call = self.sample.key(&k.stock);
            call.key(&k.buyers).key(&k.orders).key(&k.dlq).key(&k.refused).arg(super::keys::GROUP);
            pipe.invoke_script(&call);
        }
        match pipe.query_async(redis).await {
            Err(e) if e.kind() == redis::ErrorKind::NoScriptError => {
                self.sample.prepare_invoke().load_async(redis).await?;
                pipe.query_async(redis).await
            }
            other => other,
        }
    }
}
