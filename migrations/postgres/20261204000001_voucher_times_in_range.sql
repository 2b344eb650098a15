-- Sale times no client reads back (migrations/sqlite has the same change): before a
-- sale's window was bounded (a month long, its start within a year: 2026-11-30), a
-- time in year 0000 with a positive offset, or 9999 with a negative one, was kept,
-- and in UTC its year is -1 or 10000, which the server writes with a sign and five
-- digits; one such sale broke every reader of the sales list. Each is brought to
-- the nearest time a reader takes: a start to 1970 at the earliest, both ends to the
-- last millisecond of 9999 at the latest (a start one before), so the sale keeps
-- ending after it begins.
UPDATE vouchers SET begins_at = 0 WHERE begins_at < 0;
UPDATE vouchers SET begins_at = 253402300799998 WHERE begins_at > 253402300799998;
UPDATE vouchers SET ends_at = 253402300799999 WHERE ends_at > 253402300799999;
