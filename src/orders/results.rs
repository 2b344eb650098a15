//! Grab results in Redis (`…:results`, order id → value): the one owner of their
//! format, `<status>:<user id>[:<reason>]`. Rust writes every value: the gate is handed
//! its `queued` value and the give-back its `failed` value as script arguments
//! (`lua/grab.lua`, `lua/fail.lua`), and the worker writes `success`.

use super::FailReason;

/// One stored result: where the grab stands, and whose it was (only they may read it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoredResult {
    /// Granted; the worker has not saved it yet.
    Queued { user_id: i64 },
    /// Saved: the database holds the order.
    Success { user_id: i64 },
    /// Granted, but it will never be an order.
    Failed { user_id: i64, reason: FailReason },
}

impl StoredResult {
    /// Whose grab it was.
    pub fn user_id(self) -> i64 {
        match self {
            Self::Queued { user_id } | Self::Success { user_id } | Self::Failed { user_id, .. } => user_id,
        }
    }

    /// The value as stored.
    pub fn encode(self) -> String {
        match self {
            Self::Queued { user_id } => format!("queued:{user_id}"),
            Self::Success { user_id } => format!("success:{user_id}"),
            Self::Failed { user_id, reason } => format!("failed:{user_id}:{}", reason.as_str()),
        }
    }

    /// Reads a stored value; `None` for anything this module did not write.
    pub fn parse(raw: &str) -> Option<Self> {
        let mut parts = raw.splitn(3, ':');
        let status = parts.next()?;
        let user_id = parts.next()?.parse().ok()?;
        // A failure has its reason, and nothing else has one.
        match (status, parts.next()) {
            ("queued", None) => Some(Self::Queued { user_id }),
            ("success", None) => Some(Self::Success { user_id }),
            ("failed", Some(name)) => Some(Self::Failed { user_id, reason: FailReason::from_name(name)? }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_round_trip() {
        let failed = |reason| StoredResult::Failed { user_id: 7, reason };
        for r in
            [StoredResult::Queued { user_id: 7 }, StoredResult::Success { user_id: 7 }, failed(FailReason::DeadLetter)]
        {
            assert_eq!(StoredResult::parse(&r.encode()), Some(r));
        }
        assert_eq!(failed(FailReason::AlreadyBought).encode(), "failed:7:already_bought");
        assert_eq!(StoredResult::parse("weird:7"), None);
        assert_eq!(StoredResult::parse("success:x"), None);
        assert_eq!(StoredResult::parse("failed:7:made_up"), None);
        assert_eq!(StoredResult::parse("failed:7"), None);
        assert_eq!(StoredResult::parse("success:7:sold_out"), None);
    }
}
