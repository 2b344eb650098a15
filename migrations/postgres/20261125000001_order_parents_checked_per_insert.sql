-- An order's shopper and voucher must exist: checked once per insert statement, not by
-- a foreign key per row.
--
-- A foreign key runs `SELECT ... FOR KEY SHARE` on the parent row of every row
-- inserted. In a storm every order has a shopper of its own, so that is a row lock on
-- thousands of distinct `users` rows: each one writes the lock into the row's heap page
-- and the write-ahead log. The two foreign keys of `orders` were 40-50 % of the
-- database's CPU per persisted order (bench, 20k grabs: 20-22 µs a grab with them,
-- 9-13 µs without).
--
-- What replaces them keeps the same rules:
--   * an insert naming a missing shopper or voucher fails whole, with the foreign key's
--     SQLSTATE (23503), like the foreign key did;
--   * a shopper or voucher that has orders cannot be deleted.
-- One thing the locks gave is not kept: a shopper deleted while an insert of their
-- order is in flight could leave that order behind. The app never deletes users or
-- vouchers; an operator deleting one by hand is refused once its orders are stored.
-- (SQLite keeps its foreign keys: it checks them with a look-up and takes no lock.)

ALTER TABLE orders DROP CONSTRAINT orders_voucher_id_fkey;
ALTER TABLE orders DROP CONSTRAINT orders_user_id_fkey;

CREATE FUNCTION orders_parents_exist() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Scalar subqueries, not `NOT EXISTS`: the planner turns an anti-join over a
    -- batch of a thousand orders into a hash of every user, a scan of the whole table
    -- per insert (100k shoppers: five times the foreign keys' cost); a scalar
    -- subquery stays one primary-key probe per order (an index-only scan).
    IF EXISTS (SELECT 1 FROM new_orders n WHERE (SELECT u.id FROM users u WHERE u.id = n.user_id) IS NULL)
        OR EXISTS (
            SELECT 1 FROM (SELECT DISTINCT voucher_id FROM new_orders) n
            WHERE (SELECT v.id FROM vouchers v WHERE v.id = n.voucher_id) IS NULL
        ) THEN
        RAISE EXCEPTION 'an order names a user or voucher that does not exist'
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END
$$;

-- One run per statement, over the rows it inserted (a batch of up to 1000 orders).
CREATE TRIGGER orders_parents_exist AFTER INSERT ON orders
    REFERENCING NEW TABLE AS new_orders
    FOR EACH STATEMENT EXECUTE FUNCTION orders_parents_exist();

-- An order's shopper and voucher are never changed; refuse it rather than check it.
CREATE FUNCTION orders_parents_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'an order''s user and voucher cannot change'
        USING ERRCODE = 'foreign_key_violation';
END
$$;

CREATE TRIGGER orders_parents_fixed BEFORE UPDATE OF voucher_id, user_id ON orders
    FOR EACH ROW WHEN (OLD.voucher_id IS DISTINCT FROM NEW.voucher_id OR OLD.user_id IS DISTINCT FROM NEW.user_id)
    EXECUTE FUNCTION orders_parents_fixed();

-- The parent side: a shopper or voucher with orders stays.
CREATE FUNCTION parent_without_orders() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (TG_TABLE_NAME = 'users' AND EXISTS (SELECT 1 FROM orders WHERE user_id = OLD.id))
        OR (TG_TABLE_NAME = 'vouchers' AND EXISTS (SELECT 1 FROM orders WHERE voucher_id = OLD.id)) THEN
        RAISE EXCEPTION '% % still has orders', TG_TABLE_NAME, OLD.id
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN OLD;
END
$$;

CREATE TRIGGER users_keep_ordering_shoppers BEFORE DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION parent_without_orders();
CREATE TRIGGER vouchers_keep_sold_vouchers BEFORE DELETE ON vouchers
    FOR EACH ROW EXECUTE FUNCTION parent_without_orders();
