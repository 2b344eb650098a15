-- How each unsaved grant ended, for its shopper (`report::store::unsaved_grant`): a
-- shopper whose result Redis lost since (a failover, a rebuild) still hears why the
-- grant was not kept (`already_bought`, `sold_out`) instead of hearing it lost. Rows
-- written before have neither, and answer no shopper.
ALTER TABLE unsaved_grants ADD COLUMN user_id BIGINT;
ALTER TABLE unsaved_grants ADD COLUMN reason TEXT;
