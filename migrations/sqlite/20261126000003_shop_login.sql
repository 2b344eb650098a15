-- The shop's own login (optional): a shopper known by the `sub` of the shop's tokens
-- (migrations/postgres has the same schema). NULL for Seckill's own accounts.
ALTER TABLE users ADD COLUMN subject TEXT;
CREATE UNIQUE INDEX users_by_subject ON users (subject);
