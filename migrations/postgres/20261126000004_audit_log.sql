-- The operator's log: every operator action, who did it (an operator's name, or
-- `token`), what, the state before and after (JSON), and when (migrations/sqlite has
-- the same schema). Rows are never changed or deleted.
CREATE TABLE audit_log (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          BIGINT  NOT NULL,
    actor       TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    voucher_id  BIGINT,
    before      TEXT,
    after       TEXT
);
CREATE INDEX audit_log_by_voucher ON audit_log (voucher_id, id);
