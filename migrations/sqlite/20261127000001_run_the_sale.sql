-- Running a live sale (migrations/postgres has the same schema): a price, a face
-- value, a pause, a version every change bumps, and stock that can be added and
-- withdrawn. `stock` becomes the units on sale now (what was created, plus `added`,
-- less `withdrawn`), so `stock - stock_left` stays the orders sold, and a sale whose
-- every unit was withdrawn has 0. SQLite cannot change a CHECK in place: the table is
-- rebuilt with the same rows (foreign keys checked at commit, when every voucher is
-- back under its id).
PRAGMA defer_foreign_keys = ON;
CREATE TABLE vouchers_before_run AS SELECT * FROM vouchers;
DROP TABLE vouchers;
CREATE TABLE vouchers (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    title       TEXT    NOT NULL,
    stock       BIGINT  NOT NULL CHECK (stock >= 0),
    stock_left  BIGINT  NOT NULL CHECK (stock_left >= 0 AND stock_left <= stock),
    begins_at   BIGINT  NOT NULL,
    ends_at     BIGINT  NOT NULL CHECK (ends_at > begins_at),
    created_at  BIGINT  NOT NULL,
    paid        BIGINT  NOT NULL DEFAULT 0,
    cancelled   BIGINT  NOT NULL DEFAULT 0,
    -- What a shopper pays and what the voucher is worth, in the currency's minor units
    -- (SECKILL_CURRENCY).
    price       BIGINT  NOT NULL DEFAULT 0 CHECK (price >= 0),
    face_value  BIGINT  NOT NULL DEFAULT 0 CHECK (face_value >= price),
    -- 1 while an operator has paused the sale.
    paused      BIGINT  NOT NULL DEFAULT 0,
    -- Bumped by every change of the row an operator makes; Redis's copy of the sale's
    -- window carries it, so an older copy never overwrites a newer one.
    version     BIGINT  NOT NULL DEFAULT 1,
    added       BIGINT  NOT NULL DEFAULT 0,
    withdrawn   BIGINT  NOT NULL DEFAULT 0
);
INSERT INTO vouchers (id, title, stock, stock_left, begins_at, ends_at, created_at, paid, cancelled)
SELECT id, title, stock, stock_left, begins_at, ends_at, created_at, paid, cancelled FROM vouchers_before_run;
DROP TABLE vouchers_before_run;
CREATE INDEX vouchers_ends_at ON vouchers (ends_at);

-- What the shopper pays, as it was when the order was granted.
ALTER TABLE orders ADD COLUMN price BIGINT NOT NULL DEFAULT 0;

-- Stock an operator added or withdrew. Adding goes to the database first and withdrawing
-- to Redis first (only Redis knows what is unsold); either way the row is written
-- before Redis is asked, with `applied` NULL while Redis may still owe its step
-- (lua/stock.lua, once per row). The sweeper finishes rows a crash left half done.
CREATE TABLE stock_changes (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    voucher_id  BIGINT  NOT NULL,
    -- Units asked for: more than 0 added, less than 0 withdrawn.
    units       BIGINT  NOT NULL,
    -- Units the change made: `units`, or 0 for a withdrawal Redis refused.
    applied     BIGINT,
    created_at  BIGINT  NOT NULL
);
CREATE INDEX stock_changes_owed ON stock_changes (created_at) WHERE applied IS NULL;
