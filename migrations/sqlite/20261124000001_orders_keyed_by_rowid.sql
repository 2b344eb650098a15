-- Orders keyed by their id as SQLite's rowid. Declared `BIGINT PRIMARY KEY`, the id
-- was a second b-tree beside the table's hidden rowid: every order persisted cost one
-- more b-tree insert, and every look-up by id one more search. SQLite cannot change a
-- primary key in place, so the table is rebuilt with the same columns, checks and
-- indexes. (Ids are 64-bit signed integers, as rowids are; nothing references orders.)
CREATE TABLE orders_by_rowid (
    id            INTEGER PRIMARY KEY,
    voucher_id    BIGINT  NOT NULL REFERENCES vouchers (id),
    user_id       BIGINT  NOT NULL REFERENCES users (id),
    status        TEXT    NOT NULL DEFAULT 'unpaid'
                          CHECK (status IN ('unpaid', 'paid', 'cancelled')),
    created_at    BIGINT  NOT NULL,
    pay_deadline  BIGINT  NOT NULL DEFAULT 0,
    paid_at       BIGINT,
    cancelled_at  BIGINT,
    cancel_reason TEXT
);
INSERT INTO orders_by_rowid
    (id, voucher_id, user_id, status, created_at, pay_deadline, paid_at, cancelled_at, cancel_reason)
SELECT id, voucher_id, user_id, status, created_at, pay_deadline, paid_at, cancelled_at, cancel_reason
FROM orders;
DROP TABLE orders;
ALTER TABLE orders_by_rowid RENAME TO orders;

CREATE UNIQUE INDEX orders_one_per_user ON orders (voucher_id, user_id) WHERE status <> 'cancelled';
CREATE INDEX orders_unpaid_by_deadline ON orders (pay_deadline) WHERE status = 'unpaid';
CREATE INDEX orders_by_user ON orders (user_id, id);
