//! Rebuilds of vouchers Redis lost, started by grabs (`server::not_in_redis`): one per
//! voucher at a time in this process.
//!
//! Every grab that meets the gate's `unknown_voucher` before the rebuild lands would
//! otherwise read the voucher and run a rebuild of its own: each waits for the
//! voucher's lock in the database and reads every buyer for its snapshot, in turn,
//! holding a pooled connection all the while. In a storm that is hundreds of them.

use std::{collections::HashSet, sync::Mutex};

/// The vouchers a grab is rebuilding now.
#[derive(Default)]
pub struct Rebuilds(Mutex<HashSet<i64>>);

/// A grab's turn to rebuild a voucher; the turn ends when it is dropped, also when
/// the grab is cancelled (its client went away).
pub struct Rebuilding<'a> {
    rebuilds: &'a Rebuilds,
    voucher_id: i64,
}

impl Rebuilds {
    /// The voucher's turn, or `None` while another grab holds it.
    pub fn start(&self, voucher_id: i64) -> Option<Rebuilding<'_>> {
        let free = self.lock().insert(voucher_id);
        // Built only when the turn is ours: dropping one ends the turn.
        free.then(|| Rebuilding { rebuilds: self, voucher_id })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<i64>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for Rebuilding<'_> {
    fn drop(&mut self) {
        self.rebuilds.lock().remove(&self.voucher_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_turn_per_voucher_until_it_ends() {
        let rebuilds = Rebuilds::default();
        let turn = rebuilds.start(1).expect("the first grab rebuilds");
        assert!(rebuilds.start(1).is_none(), "a second grab waits");
        assert!(rebuilds.start(2).is_some(), "another voucher has its own turn");
        drop(turn);
        assert!(rebuilds.start(1).is_some(), "the turn ended with its grab");
    }
}
