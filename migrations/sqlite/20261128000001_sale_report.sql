-- The sale's report (migrations/sqlite and migrations/postgres are the same).
-- `sold_out_at`: when the gate first sold the last unit (Unix ms, the gate's clock),
-- copied from the sale's Redis window by the live sampler.
ALTER TABLE vouchers ADD COLUMN sold_out_at BIGINT;

-- The refusals shoppers were answered, per second (Unix seconds) and error code,
-- counted by each process and added here about once a second (`report::tally`).
-- Grants are not counted here: the orders and dead letters are their record.
CREATE TABLE sale_refusals (
    voucher_id  BIGINT  NOT NULL REFERENCES vouchers (id),
    second      BIGINT  NOT NULL,
    code        TEXT    NOT NULL,
    n           BIGINT  NOT NULL,
    PRIMARY KEY (voucher_id, second, code)
);

-- How long the gate took to answer the grabs it decided, as counts per latency bucket
-- (`le_us`: the bucket's upper bound in microseconds; `report::LATENCY_BOUNDS_US`).
CREATE TABLE sale_latency (
    voucher_id  BIGINT  NOT NULL REFERENCES vouchers (id),
    le_us       BIGINT  NOT NULL,
    n           BIGINT  NOT NULL,
    PRIMARY KEY (voucher_id, le_us)
);
