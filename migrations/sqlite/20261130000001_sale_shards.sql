-- A sale over several shards (migrations/sqlite and migrations/postgres have the same
-- schema). A voucher's units are split over `shards` buckets in Redis, each in its own
-- hash slot, so a Redis Cluster spreads one sale over its masters (src/sale/shards.rs).
-- Fixed when the voucher is made: a shopper's bucket is a hash of the user id.
ALTER TABLE vouchers ADD COLUMN shards BIGINT NOT NULL DEFAULT 1 CHECK (shards BETWEEN 1 AND 64);

-- A stock change is made in one bucket (`bucket`). Units moving from a bucket that
-- runs dry are two rows: the withdrawal from the source names its target (`move_to`),
-- and the addition to the target, written when the withdrawal is settled, names its
-- source (`move_from`). A move leaves the voucher's totals (stock, added, withdrawn)
-- alone; rebuilding one bucket from the database counts its rows.
ALTER TABLE stock_changes ADD COLUMN bucket BIGINT NOT NULL DEFAULT 0;
ALTER TABLE stock_changes ADD COLUMN move_to BIGINT;
ALTER TABLE stock_changes ADD COLUMN move_from BIGINT;
-- A bucket's rebuild reads its changes under the voucher's lock.
CREATE INDEX stock_changes_by_bucket ON stock_changes (voucher_id, bucket);
