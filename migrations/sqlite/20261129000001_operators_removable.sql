-- Operators can be removed, demoted and signed out for good (migrations/postgres has the
-- same change). An admin cookie names its operator's `generation`: signing out or a
-- new password raises it, and every process then refuses the older cookies (they
-- follow this table, `auth::operators::Directory`). `last_sign_in_at` (Unix ms) is
-- shown on the admin page's list of operators.
ALTER TABLE operators ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;
ALTER TABLE operators ADD COLUMN last_sign_in_at BIGINT;
