//! A sale event: its kinds, and the one place that writes and reads its message.
//! Rust writes every message: the gate is handed its `sold_out` message and the
//! give-back its `restock` and `dead_letter` messages as script arguments, the worker
//! announces its comings and goings and the voucher endpoints their changes
//! ([`super::publish`]); the bus's listener parses them ([`super::listen`]).

use std::fmt;

/// Something every process must hear of at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SaleEvent {
    /// The last unit went: refuse grabs locally for a while.
    SoldOut {
        voucher_id: i64,
    },
    /// A unit came back: clear the local sold-out flag.
    Restocked {
        voucher_id: i64,
    },
    /// An order was given up and its unit and buyer slot returned.
    DeadLettered {
        voucher_id: i64,
        order_id: i64,
    },
    WorkerJoined {
        worker: String,
    },
    WorkerLeft {
        worker: String,
    },
    /// This process's gate granted an order: its worker's reader of the voucher's
    /// bucket wakes. Told only here ([`Bus::tell_here`](super::Bus::tell_here)), never
    /// published: other processes' readers find the order by their next poll.
    Granted {
        voucher_id: i64,
        bucket: u32,
    },
    /// A voucher was created or warmed: the shop page each process shares
    /// (`server::page_cache`) is out of date. `origin` names the process that did it
    /// (0 when an older process did not say).
    VoucherChanged {
        voucher_id: i64,
        origin: u64,
    },
}

impl SaleEvent {
    /// The message as published (see the [`Display`](fmt::Display) impl).
    pub fn encode(&self) -> String {
        self.to_string()
    }

    /// The process that made the change, for the events that name it.
    pub fn origin(&self) -> Option<u64> {
        match *self {
            Self::VoucherChanged { origin, .. } => Some(origin),
            _ => None,
        }
    }

    /// Reads a message; `None` for anything [`encode`](Self::encode) does not write.
    pub fn parse(message: &str) -> Option<Self> {
        let (kind, rest) = message.split_once(':')?;
        let id = |s: &str| s.parse::<i64>().ok();
        Some(match kind {
            "sold_out" => Self::SoldOut { voucher_id: id(rest)? },
            "restock" => Self::Restocked { voucher_id: id(rest)? },
            "dead_letter" => {
                let (v, order) = rest.split_once(':')?;
                Self::DeadLettered { voucher_id: id(v)?, order_id: id(order)? }
            }
            "granted" => {
                let (v, bucket) = rest.split_once(':').unwrap_or((rest, "0"));
                Self::Granted { voucher_id: id(v)?, bucket: bucket.parse().ok()? }
            }
            "worker_joined" => Self::WorkerJoined { worker: rest.to_owned() },
            "worker_left" => Self::WorkerLeft { worker: rest.to_owned() },
            "voucher_changed" => {
                let (v, origin) = rest.split_once(':').unwrap_or((rest, "0"));
                Self::VoucherChanged { voucher_id: id(v)?, origin: origin.parse().ok()? }
            }
            _ => return None,
        })
    }
}

/// The message: `sold_out:<voucher>`, `restock:<voucher>`,
/// `dead_letter:<voucher>:<order>`, `worker_joined:<name>`, `worker_left:<name>`,
/// `voucher_changed:<voucher>:<origin>` (and `granted:<voucher>`, never published).
impl fmt::Display for SaleEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SoldOut { voucher_id } => write!(f, "sold_out:{voucher_id}"),
            Self::Restocked { voucher_id } => write!(f, "restock:{voucher_id}"),
            Self::DeadLettered { voucher_id, order_id } => write!(f, "dead_letter:{voucher_id}:{order_id}"),
            Self::Granted { voucher_id, bucket } => write!(f, "granted:{voucher_id}:{bucket}"),
            Self::WorkerJoined { worker } => write!(f, "worker_joined:{worker}"),
            Self::WorkerLeft { worker } => write!(f, "worker_left:{worker}"),
            Self::VoucherChanged { voucher_id, origin } => write!(f, "voucher_changed:{voucher_id}:{origin}"),
        }
    }
}

/// A script's argument: the message, written straight into the command (every grab
/// hands the gate its sale's `sold_out` message, so it is not built apart first).
impl redis::ToRedisArgs for SaleEvent {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        out.write_arg_fmt(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip() {
        for e in [
            SaleEvent::SoldOut { voucher_id: 42 },
            SaleEvent::Restocked { voucher_id: 42 },
            SaleEvent::DeadLettered { voucher_id: 42, order_id: 123_456 },
            SaleEvent::WorkerJoined { worker: "w-1".into() },
            SaleEvent::WorkerLeft { worker: "w:2".into() },
            SaleEvent::VoucherChanged { voucher_id: 7, origin: u64::MAX },
            SaleEvent::Granted { voucher_id: 42, bucket: 3 },
        ] {
            assert_eq!(SaleEvent::parse(&e.encode()), Some(e));
        }
        assert_eq!(SaleEvent::parse("sold_out:x"), None);
        assert_eq!(SaleEvent::parse("nonsense"), None);
        // From a process of the version before origins: heard as someone else's.
        assert_eq!(SaleEvent::parse("voucher_changed:7"), Some(SaleEvent::VoucherChanged { voucher_id: 7, origin: 0 }));
        assert_eq!(SaleEvent::parse("voucher_changed:7:x"), None);
        let mut cmd = redis::Cmd::new();
        cmd.arg(SaleEvent::SoldOut { voucher_id: 42 });
        assert_eq!(cmd.args_iter().next(), Some(redis::Arg::Simple(&b"sold_out:42"[..])), "as an argument");
    }
}
