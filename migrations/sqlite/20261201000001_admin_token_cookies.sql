-- The admin token's cookies can be ended (migrations/postgres has the same change). A
-- cookie bought with the token carries no token: it names the token's `generation`
-- (and a digest of the token, so a new token ends them too). Signing out with one
-- raises the generation, and every process then refuses the older cookies: they
-- follow this one row with the operators table (`auth::operators::Directory`).
CREATE TABLE admin_token (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    generation BIGINT  NOT NULL
);
INSERT INTO admin_token (id, generation) VALUES (1, 0);
