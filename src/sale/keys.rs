//! Redis key names of one voucher's sale. All share the hash tag `{v<id>}` so every
//! script call touches one Cluster slot; scripts get them through `KEYS[]`.

use super::events::SaleEvent;

/// The keys of one voucher, in the order the scripts expect them.
#[derive(Clone, Debug)]
pub struct SaleKeys {
    /// Remaining stock (string counter).
    pub stock: String,
    /// Set of user ids holding an order.
    pub buyers: String,
    /// Hash `begins`/`ends`, in Unix milliseconds.
    pub window: String,
    /// Stream of granted orders, read by the worker's consumer group.
    pub orders: String,
    /// Hash order id → `status:user_id[:reason]`.
    pub results: String,
    /// Stream of orders that failed too often (dead letters).
    pub dlq: String,
    /// Count of grabs the gate refused (for the live refusal rate).
    pub refused: String,
    /// Set of cancelled order ids whose unit Redis has taken back (once each).
    pub restocked: String,
    /// Not a key: the message the gate publishes when this sale sells out. Every grab
    /// hands it to the gate, so it is encoded once, with the keys.
    pub sold_out_event: String,
}

impl SaleKeys {
    pub fn new(namespace: &str, voucher_id: i64) -> Self {
        let base = format!("{namespace}:{{v{voucher_id}}}");
        Self {
            stock: format!("{base}:stock"),
            buyers: format!("{base}:buyers"),
            window: format!("{base}:window"),
            orders: format!("{base}:orders"),
            results: format!("{base}:results"),
            dlq: format!("{base}:dlq"),
            refused: format!("{base}:refused"),
            restocked: format!("{base}:restocked"),
            sold_out_event: SaleEvent::SoldOut { voucher_id }.encode(),
        }
    }
}

/// Consumer group of the order streams.
pub const GROUP: &str = "persist";

/// Pub/sub channel of sale events (`sold_out:<id>`, `restock:<id>`).
pub fn events_channel(namespace: &str) -> String {
    format!("{namespace}:events")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_one_voucher_share_a_hash_tag() {
        let k = SaleKeys::new("seckill", 42);
        for key in [&k.stock, &k.buyers, &k.window, &k.orders, &k.results, &k.dlq, &k.refused, &k.restocked] {
            assert!(key.starts_with("seckill:{v42}:"), "{key}");
        }
        assert_ne!(SaleKeys::new("seckill", 4).stock, SaleKeys::new("seckill", 42).stock);
    }
}
