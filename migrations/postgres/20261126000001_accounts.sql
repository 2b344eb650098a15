-- Accounts: a shopper signs up with a name and a password (migrations/sqlite has
-- the same schema).

-- The argon2id hash (PHC string: algorithm, parameters, salt, hash). NULL for users
-- made by signing in with a name alone, before passwords existed: nobody can sign in
-- as them, and their name stays taken (README: "Accounts").
ALTER TABLE users ADD COLUMN password_hash TEXT;
-- Bumped by "sign out everywhere" and a password change: every session cookie carries
-- the generation it was issued in, and one below the user's is refused.
ALTER TABLE users ADD COLUMN session_generation BIGINT NOT NULL DEFAULT 0;

-- Sessions ended before their cookie expires, in the order they were ended: a single
-- session (sign out: `session_id`) or every session of a user up to a generation
-- (`generation`). Every process follows this table (src/auth/ended.rs), so a cookie
-- stops working everywhere without a database read per request. Rows go once the
-- cookies they end have expired.
CREATE TABLE sessions_ended (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id     BIGINT  NOT NULL REFERENCES users (id),
    session_id  TEXT,
    generation  BIGINT,
    ended_at    BIGINT  NOT NULL,
    expires_at  BIGINT  NOT NULL,
    CHECK ((session_id IS NULL) <> (generation IS NULL))
);
CREATE INDEX sessions_ended_by_time ON sessions_ended (ended_at);
CREATE INDEX sessions_ended_by_expiry ON sessions_ended (expires_at);
