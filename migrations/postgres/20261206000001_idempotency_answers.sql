-- Operators' answers kept under their Idempotency-Key (`server::idempotency`), beside
-- Redis's copy: a retry after Redis lost its data (a failover that lost the last
-- writes, a restart without its file) answers the first answer instead of making
-- the change again. Shoppers' are kept in Redis only.
-- `kept_at`: the Redis key the answer is kept under; `answer`: what Redis holds there
-- (`done <fingerprint> <status> <body>`); `kept_until`: Unix ms, after which it goes.
CREATE TABLE idempotency_answers (
    kept_at     TEXT    PRIMARY KEY,
    answer      TEXT    NOT NULL,
    kept_until  BIGINT  NOT NULL
);
CREATE INDEX idempotency_answers_by_age ON idempotency_answers (kept_until);
