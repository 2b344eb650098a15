-- Orders a worker committed that Redis may never settle unless told
-- (`src/orders/unsettled.rs`; migrations/postgres has the same change).
--
-- Every rebuild of a sale's Redis counts itself on its voucher's row in the
-- transaction of its snapshot, and a worker's transaction reads the count as it locks
-- the row: a count other than the one it had seen when it read the batch means the
-- batch may have come from the stream Redis lost, and its orders go on record here,
-- in the same transaction. The worker strikes the record once Redis has settled
-- them; the sweeper settles what a worker killed in between left. The table holds
-- only those few batches: no index. Ids are never reused (a record struck late must
-- not strike a newer one).
ALTER TABLE vouchers ADD COLUMN rebuilds BIGINT NOT NULL DEFAULT 0;
CREATE TABLE unsettled_batches (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    voucher_id BIGINT  NOT NULL,
    -- JSON: [[order id, user id], ...]
    orders     TEXT    NOT NULL,
    saved_at   BIGINT  NOT NULL
);
