-- Running a live sale (migrations/sqlite has the same schema): a price, a face
-- value, a pause, a version every change bumps, and stock that can be added and
-- withdrawn. `stock` becomes the units on sale now (what was created, plus `added`,
-- less `withdrawn`), so `stock - stock_left` stays the orders sold, and a sale whose
-- every unit was withdrawn has 0.
ALTER TABLE vouchers DROP CONSTRAINT vouchers_stock_check;
ALTER TABLE vouchers ADD CONSTRAINT vouchers_stock_check CHECK (stock >= 0);
-- What a shopper pays and what the voucher is worth, in the currency's minor units
-- (SECKILL_CURRENCY).
ALTER TABLE vouchers ADD COLUMN price BIGINT NOT NULL DEFAULT 0 CHECK (price >= 0);
ALTER TABLE vouchers ADD COLUMN face_value BIGINT NOT NULL DEFAULT 0;
ALTER TABLE vouchers ADD CONSTRAINT vouchers_face_value_check CHECK (face_value >= price);
-- 1 while an operator has paused the sale.
ALTER TABLE vouchers ADD COLUMN paused BIGINT NOT NULL DEFAULT 0;
-- Bumped by every change of the row an operator makes; Redis's copy of the sale's
-- window carries it, so an older copy never overwrites a newer one.
ALTER TABLE vouchers ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE vouchers ADD COLUMN added BIGINT NOT NULL DEFAULT 0;
ALTER TABLE vouchers ADD COLUMN withdrawn BIGINT NOT NULL DEFAULT 0;

-- What the shopper pays, as it was when the order was granted.
ALTER TABLE orders ADD COLUMN price BIGINT NOT NULL DEFAULT 0;

-- Stock an operator added or withdrew. Adding goes to the database first and withdrawing
-- to Redis first (only Redis knows what is unsold); either way the row is written
-- before Redis is asked, with `applied` NULL while Redis may still owe its step
-- (lua/stock.lua, once per row). The sweeper finishes rows a crash left half done.
CREATE TABLE stock_changes (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    voucher_id  BIGINT  NOT NULL,
    -- Units asked for: more than 0 added, less than 0 withdrawn.
    units       BIGINT  NOT NULL,
    -- Units the change made: `units`, or 0 for a withdrawal Redis refused.
    applied     BIGINT,
    created_at  BIGINT  NOT NULL
);
CREATE INDEX stock_changes_owed ON stock_changes (created_at) WHERE applied IS NULL;
