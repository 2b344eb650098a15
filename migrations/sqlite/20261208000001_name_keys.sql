-- A person's name as it is compared (`auth::names::key`): case, width, spacing and
-- look-alike letters (Unicode's confusables) folded. One name per key, so nobody
-- takes a name that passes for another's. Rows made before have none until the next
-- start fills them in (`auth::names::fill_keys`); NULLs do not collide.
ALTER TABLE users ADD COLUMN name_key TEXT;
CREATE UNIQUE INDEX users_by_name_key ON users (name_key);
ALTER TABLE operators ADD COLUMN name_key TEXT;
CREATE UNIQUE INDEX operators_by_name_key ON operators (name_key);
