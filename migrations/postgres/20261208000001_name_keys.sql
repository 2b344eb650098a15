-- A person's name as it is compared (`auth::names::Keys`), twice: by case
-- (`name_key`: `ALICE` is `alice`) and by shape (`name_shape`: `AIice`, a capital I,
-- is `alice`), each with width, spacing and look-alike letters (Unicode's confusables)
-- folded. One name per key, so nobody takes a name that passes for another's. Rows
-- made before have none until a process keys them (`auth::names::follow`, at each
-- start and every few seconds); NULLs do not collide.
ALTER TABLE users ADD COLUMN name_key TEXT;
ALTER TABLE users ADD COLUMN name_shape TEXT;
CREATE UNIQUE INDEX users_by_name_key ON users (name_key);
CREATE UNIQUE INDEX users_by_name_shape ON users (name_shape);
ALTER TABLE operators ADD COLUMN name_key TEXT;
ALTER TABLE operators ADD COLUMN name_shape TEXT;
CREATE UNIQUE INDEX operators_by_name_key ON operators (name_key);
CREATE UNIQUE INDEX operators_by_name_shape ON operators (name_shape);
