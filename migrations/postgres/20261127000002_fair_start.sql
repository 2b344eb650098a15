-- A fair start (migrations/sqlite and migrations/postgres are the same): a sale may
-- require a grab token, which the server issues to each shopper only from the sale's
-- start. The token is derived from `start_secret`, which never leaves the server.
ALTER TABLE vouchers ADD COLUMN fair_start BIGINT NOT NULL DEFAULT 0;
ALTER TABLE vouchers ADD COLUMN start_secret TEXT NOT NULL DEFAULT '';
