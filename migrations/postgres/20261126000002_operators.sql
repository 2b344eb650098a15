-- Operators: named accounts that run sales, apart from shoppers (migrations/sqlite
-- has the same schema). `admin` may also add operators; `operator` runs sales.
CREATE TABLE operators (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            TEXT    NOT NULL UNIQUE,
    password_hash   TEXT    NOT NULL,
    role            TEXT    NOT NULL CHECK (role IN ('operator', 'admin')),
    created_at      BIGINT  NOT NULL
);
