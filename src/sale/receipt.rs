//! A grant's receipt: proof that the gate gave this order id to this shopper for this
//! sale. Order ids are predictable (a second and a counter handed out in order), so an
//! id alone proves nothing. Redis can lose a grant with its data (emptied, or a replica
//! promoted before the grab reached it), and then only the shopper who was granted it
//! may have it declared lost (`grab::grab_result`): declaring an id lost buries it, so
//! a worker never saves it later. Without a receipt anybody who guessed the next ids
//! could bury the grants that later take them, or a granted order of another bucket
//! not yet saved. The receipt is a MAC over (shopper, voucher, order id) under a key
//! every process derives from the session secret, so any process checks any
//! process's receipts, and a receipt is worth nothing for another shopper, sale or id.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// Bytes of the MAC a receipt carries (128 bits: guessing one online is hopeless).
const RECEIPT_BYTES: usize = 16;

/// Makes and checks receipts.
pub struct Receipts {
    /// Keyed once: each receipt clones the keyed state instead of keying again.
    mac: Hmac<Sha256>,
}

impl Receipts {
    /// Receipts under `key` (`Secrets::derived_key`).
    pub fn new(key: [u8; 32]) -> Self {
        Self { mac: <Hmac<Sha256> as Mac>::new_from_slice(&key).expect("HMAC takes a key of any length") }
    }

    /// The receipt of the grant of `order_id` to `user_id` in `voucher_id`'s sale, as hex.
    pub fn issue(&self, user_id: i64, voucher_id: i64, order_id: i64) -> String {
        hex::encode(self.tag(user_id, voucher_id, order_id))
    }

    /// Whether `receipt` is the one issued for this grant (compared in constant time).
    pub fn holds(&self, user_id: i64, voucher_id: i64, order_id: i64, receipt: &str) -> bool {
        let mut given = [0u8; RECEIPT_BYTES];
        if hex::decode_to_slice(receipt.trim(), &mut given).is_err() {
            return false;
        }
        self.tag(user_id, voucher_id, order_id).ct_eq(&given).into()
    }

    fn tag(&self, user_id: i64, voucher_id: i64, order_id: i64) -> [u8; RECEIPT_BYTES] {
        let mut mac = self.mac.clone();
        for n in [user_id, voucher_id, order_id] {
            mac.update(&n.to_be_bytes());
        }
        let full = mac.finalize().into_bytes();
        let mut tag = [0u8; RECEIPT_BYTES];
        tag.copy_from_slice(&full[..RECEIPT_BYTES]);
        tag
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_holds_only_for_its_own_grant_and_key() {
        let receipts = Receipts::new([7; 32]);
        let r = receipts.issue(1, 2, 3);
        assert_eq!(r.len(), RECEIPT_BYTES * 2);
        assert!(receipts.holds(1, 2, 3, &r));
        assert!(!receipts.holds(9, 2, 3, &r), "another shopper");
        assert!(!receipts.holds(1, 9, 3, &r), "another sale");
        assert!(!receipts.holds(1, 2, 4, &r), "the next id");
        assert!(!receipts.holds(1, 2, 3, ""), "none");
        assert!(!receipts.holds(1, 2, 3, "zz"), "not hex");
        assert!(!Receipts::new([8; 32]).holds(1, 2, 3, &r), "another key");
    }
}
