-- Grants the worker ended unsaved: the database found the shopper holding another
-- order of the sale, or no unit left (`orders::fail`). No order and no dead letter
-- records them, yet their shoppers were told "queued": the report counts them among
-- the granted answers (`report::store::unsaved_grant`), each order once (the worker
-- may meet one again after a failover), and not while an order or a dead letter of
-- the same id records it.
CREATE TABLE unsaved_grants (
    order_id    BIGINT  PRIMARY KEY,
    voucher_id  BIGINT  NOT NULL REFERENCES vouchers (id)
);
CREATE INDEX unsaved_grants_by_voucher ON unsaved_grants (voucher_id);
