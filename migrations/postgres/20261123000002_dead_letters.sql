-- Orders given up (dead-lettered): one tombstone per order id, written only while the
-- order is not in `orders` (one statement decides). Persisting checks for it, so a late
-- delivery of a dead-lettered order is never stored: the unit the dead letter gave
-- back is never given twice, and an order is either persisted or buried, never both.
CREATE TABLE dead_letters (
    order_id    BIGINT  PRIMARY KEY,
    voucher_id  BIGINT  NOT NULL,
    user_id     BIGINT  NOT NULL,
    reason      TEXT    NOT NULL,
    created_at  BIGINT  NOT NULL
);
