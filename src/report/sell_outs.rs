//! The moment each sale first sold out, kept for its report: the gate notes it in
//! the sale's Redis window, and the live sampler, which reads that window a few times
//! a second, hands it here to be copied to the sale's row.

use crate::{
    backend::{lone_task::LoneTask, Db},
    voucher::store as vouchers,
};

/// Copies the moment each sale first sold out from its Redis window (the gate's) to
/// its row, once: the report reads it there after Redis let the sale's keys go. In a
/// task of its own, one at a time: the write may wait for the database's lock (a
/// storm's worker holds it often), and the live numbers must not wait with it.
#[derive(Default)]
pub struct SellOuts(LoneTask);

impl SellOuts {
    /// Keeps `owed`: (voucher, its first sell-out in Unix ms) of sales whose row has
    /// none yet. Skipped while the last round's writes are under way (the next round
    /// hands them again).
    pub fn keep(&mut self, db: &Db, owed: Vec<(i64, i64)>) {
        if owed.is_empty() {
            return;
        }
        let db = db.clone();
        self.0.start(async move {
            for (id, at) in owed {
                if let Err(e) = vouchers::record_sold_out(&db, id, at).await {
                    tracing::warn!(voucher_id = id, "report: keeping the sell-out: {e}; trying again");
                    return;
                }
            }
        });
    }
}
