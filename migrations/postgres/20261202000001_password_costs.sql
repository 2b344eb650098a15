-- Every cost a stored password hash may have been made at (migrations/sqlite has the
-- same change): argon2id's parameters as a hash names them (`m=19456,t=2,p=1`). Each
-- process adds its own cost when it starts, and verifies unknown names' decoy at the
-- slowest of them (`auth::password::decoy_cost`), so after a change of cost an unknown
-- name still answers as slowly as the slowest account. The costs of hashes already
-- stored are taken from them here.
CREATE TABLE password_costs (
    params TEXT PRIMARY KEY
);
INSERT INTO password_costs (params)
SELECT split_part(password_hash, '$', 4) FROM users WHERE password_hash LIKE '$argon2id$v=19$%'
UNION
SELECT split_part(password_hash, '$', 4) FROM operators WHERE password_hash LIKE '$argon2id$v=19$%'
ON CONFLICT DO NOTHING;
