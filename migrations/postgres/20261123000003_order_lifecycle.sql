-- The order lifecycle: unpaid -> paid, or unpaid -> cancelled (by the shopper, or by
-- the sweeper once the payment deadline passed). Nothing else.

-- When an unpaid order is cancelled: its grab time plus SECKILL_PAY_TIMEOUT_MS.
ALTER TABLE orders ADD COLUMN pay_deadline BIGINT NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN paid_at BIGINT;
ALTER TABLE orders ADD COLUMN cancelled_at BIGINT;
-- 'timeout' (the sweeper) or 'shopper'.
ALTER TABLE orders ADD COLUMN cancel_reason TEXT;
-- Orders from before payments existed get the default 20 minutes.
UPDATE orders SET pay_deadline = created_at + 1200000;

-- What the sweeper looks for: unpaid orders by deadline.
CREATE INDEX orders_unpaid_by_deadline ON orders (pay_deadline) WHERE status = 'unpaid';
CREATE INDEX orders_by_user ON orders (user_id, id);

-- Per-voucher counts the dashboard reads a few times a second without counting rows:
-- unpaid = stock - stock_left - paid.
ALTER TABLE vouchers ADD COLUMN paid BIGINT NOT NULL DEFAULT 0;
ALTER TABLE vouchers ADD COLUMN cancelled BIGINT NOT NULL DEFAULT 0;
UPDATE vouchers SET
    paid = (SELECT COUNT(*) FROM orders o WHERE o.voucher_id = vouchers.id AND o.status = 'paid'),
    cancelled = (SELECT COUNT(*) FROM orders o WHERE o.voucher_id = vouchers.id AND o.status = 'cancelled');

-- A cancel returns its unit in the database and in Redis. The database goes first, in
-- one transaction with this row: the give-back Redis still owes. The Redis step
-- (lua/restock.lua, idempotent per order) runs next and the row is deleted; if the
-- process dies between the two, a sweeper finds the row and finishes it.
CREATE TABLE restocks_owed (
    order_id    BIGINT  PRIMARY KEY,
    voucher_id  BIGINT  NOT NULL,
    user_id     BIGINT  NOT NULL,
    created_at  BIGINT  NOT NULL
);
