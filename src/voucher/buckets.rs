//! A sale's shards as this process knows them: fixed when its voucher is made, so a
//! row read once is good for good. The gate does not wait on this (it asks Redis with
//! what it knows, and the bucket's window corrects it: `sale::gate`); the worker,
//! give-backs and result look-ups, which touch the database anyway, read the row
//! when they meet a sale first.

use super::store::{self, VoucherRow};
use crate::backend::{
    layout::{bucket_of, Bucket, SaleKeys},
    Backend, BackendError,
};
use std::sync::Arc;

/// The shards of `voucher_id`'s sale: known here, or read from its row (1 for a
/// voucher that does not exist: its keys are bucket 0's, which hold nothing).
pub async fn of(backend: &Backend, voucher_id: i64) -> Result<u32, BackendError> {
    if let Some(shards) = backend.known_shards(voucher_id) {
        return Ok(shards);
    }
    Ok(match store::get(&backend.db, voucher_id).await? {
        Some(row) => noted(backend, &row),
        None => 1,
    })
}

/// Notes the shards of a row just read, and returns them.
pub fn noted(backend: &Backend, row: &VoucherRow) -> u32 {
    let shards = row.shards();
    backend.note_shards(row.id, shards);
    shards
}

/// The keys of the bucket `user_id` belongs to in `voucher_id`'s sale.
pub async fn user_keys(backend: &Backend, voucher_id: i64, user_id: i64) -> Result<Arc<SaleKeys>, BackendError> {
    let shards = of(backend, voucher_id).await?;
    Ok(backend.bucket_keys(Bucket { voucher_id, shards, bucket: bucket_of(user_id, shards) }))
}
