-- Users, vouchers and orders. Portable SQL (SQLite now, PostgreSQL later):
-- times are Unix milliseconds in BIGINT, statuses are short TEXT values.

-- Ids are never reused (AUTOINCREMENT): Redis holds user and voucher ids in buyer
-- sets, streams and key names, which must never come to mean someone else.

-- A shopper. Signing in with the same name gives the same user.
CREATE TABLE users (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT    NOT NULL UNIQUE,
    created_at  BIGINT  NOT NULL
);

-- A seckill voucher: `stock` units on sale between `begins_at` and `ends_at`.
-- `stock_left` is the durable count, decremented as orders are persisted.
CREATE TABLE vouchers (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    title       TEXT    NOT NULL,
    stock       BIGINT  NOT NULL CHECK (stock > 0),
    stock_left  BIGINT  NOT NULL CHECK (stock_left >= 0 AND stock_left <= stock),
    begins_at   BIGINT  NOT NULL,
    ends_at     BIGINT  NOT NULL CHECK (ends_at > begins_at),
    created_at  BIGINT  NOT NULL
);

CREATE INDEX vouchers_ends_at ON vouchers (ends_at);

-- An order granted by the gate and persisted by the worker. The id comes from Redis
-- (see src/ids.rs), not from the database.
CREATE TABLE orders (
    id          BIGINT  PRIMARY KEY,
    voucher_id  BIGINT  NOT NULL REFERENCES vouchers (id),
    user_id     BIGINT  NOT NULL REFERENCES users (id),
    status      TEXT    NOT NULL DEFAULT 'unpaid'
                        CHECK (status IN ('unpaid', 'paid', 'cancelled')),
    created_at  BIGINT  NOT NULL
);

-- One live order per user and voucher: the backstop behind the Redis buyers set. A
-- cancelled order gives the slot back, so it does not count.
CREATE UNIQUE INDEX orders_one_per_user ON orders (voucher_id, user_id) WHERE status <> 'cancelled';
