//! Grab results in Redis (`…:results`, order id → value): the one owner of their
//! format, `<status>:<user id>[:<reason>]`. Rust writes every value: the gate is handed
//! its `queued` value and the give-back its `failed` value as script arguments
//! (`lua/grab.lua`, `lua/fail.lua`), and the worker writes `success`.

use super::{FailReason, GrabStatus};

/// One stored result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredResult {
    pub status: GrabStatus,
    /// Whose grab it was: only they may read it.
    pub user_id: i64,
    /// Why it failed (only when failed).
    pub reason: Option<FailReason>,
}

impl StoredResult {
    pub fn queued(user_id: i64) -> Self {
        Self { status: GrabStatus::Queued, user_id, reason: None }
    }

    pub fn success(user_id: i64) -> Self {
        Self { status: GrabStatus::Success, user_id, reason: None }
    }

    pub fn failed(user_id: i64, reason: FailReason) -> Self {
        Self { status: GrabStatus::Failed, user_id, reason: Some(reason) }
    }

    /// The value as stored.
    pub fn encode(&self) -> String {
        match self.reason {
            Some(reason) => format!("{}:{}:{}", self.status.as_str(), self.user_id, reason.as_str()),
            None => format!("{}:{}", self.status.as_str(), self.user_id),
        }
    }

    /// Reads a stored value; `None` for anything this module did not write.
    pub fn parse(raw: &str) -> Option<Self> {
        let mut parts = raw.splitn(3, ':');
        let status = match parts.next()? {
            "queued" => GrabStatus::Queued,
            "success" => GrabStatus::Success,
            "failed" => GrabStatus::Failed,
            _ => return None,
        };
        let user_id = parts.next()?.parse().ok()?;
        // A failure has its reason, and nothing else has one.
        let reason = match (status, parts.next()) {
            (GrabStatus::Failed, Some(name)) => Some(FailReason::from_name(name)?),
            (GrabStatus::Failed, None) | (_, Some(_)) => return None,
            (_, None) => None,
        };
        Some(Self { status, user_id, reason })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_round_trip() {
        for r in [StoredResult::queued(7), StoredResult::success(7), StoredResult::failed(7, FailReason::DeadLetter)] {
            assert_eq!(StoredResult::parse(&r.encode()), Some(r));
        }
        assert_eq!(StoredResult::failed(7, FailReason::AlreadyBought).encode(), "failed:7:already_bought");
        assert_eq!(StoredResult::parse("weird:7"), None);
        assert_eq!(StoredResult::parse("success:x"), None);
        assert_eq!(StoredResult::parse("failed:7:made_up"), None);
        assert_eq!(StoredResult::parse("failed:7"), None);
        assert_eq!(StoredResult::parse("success:7:sold_out"), None);
    }
}
