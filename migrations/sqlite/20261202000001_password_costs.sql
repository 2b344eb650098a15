-- Every cost a stored password hash may have been made at (migrations/postgres has the
-- same change): argon2id's parameters as a hash names them (`m=19456,t=2,p=1`). Each
-- process adds its own cost when it starts, and verifies unknown names' decoy at the
-- slowest of them (`auth::password::decoy_cost`), so after a change of cost an unknown
-- name still answers as slowly as the slowest account. The costs of hashes already
-- stored are taken from them here.
CREATE TABLE password_costs (
    params TEXT PRIMARY KEY
);
INSERT OR IGNORE INTO password_costs (params)
SELECT substr(password_hash, 16, instr(substr(password_hash, 16), '$') - 1) FROM users
 WHERE password_hash LIKE '$argon2id$v=19$%'
UNION
SELECT substr(password_hash, 16, instr(substr(password_hash, 16), '$') - 1) FROM operators
 WHERE password_hash LIKE '$argon2id$v=19$%';
