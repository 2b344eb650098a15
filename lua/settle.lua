-- Settles a batch of orders the database has just committed: results `success`,
-- stream entries acknowledged, and Redis's books squared with the database's.
-- KEYS[1] stock   KEYS[2] buyers   KEYS[3] results   KEYS[4] orders stream
-- KEYS[5] restocked (cancelled orders whose unit Redis took back)
-- ARGV[1] consumer group   ARGV[2] when the sale's keys expire (ms)
-- ARGV[3..] four per order: entry id, order id, user id, result value
-- Returns how many orders found the stock already at 0 (see below).
--
-- The gate put every buyer in `buyers` when it granted the unit. A buyer missing
-- from a voucher Redis holds means Redis lost the voucher and rebuilt it from a
-- database that had not yet committed this order (it was in a worker's hands): the
-- rebuilt stock still counts its unit, so take it now. Rebuilds run under the
-- database's write lock, so this order committed after the rebuild's snapshot and
-- after Redis held the rebuilt voucher. A voucher Redis does not hold is left alone:
-- its rebuild will read this order from the database.
local known = redis.call('EXISTS', KEYS[1]) == 1
local short = 0
for i = 3, #ARGV, 4 do
  redis.call('HSET', KEYS[3], ARGV[i + 1], ARGV[i + 3])
  redis.call('XACK', KEYS[4], ARGV[1], ARGV[i])
  -- (An order cancelled the moment it was committed has given its slot back.)
  if known and redis.call('SISMEMBER', KEYS[5], ARGV[i + 1]) == 0
      and redis.call('SADD', KEYS[2], ARGV[i + 2]) == 1 then
    if tonumber(redis.call('GET', KEYS[1])) > 0 then
      redis.call('DECR', KEYS[1])
    else
      -- Redis granted the unit again before this order settled; the database
      -- refuses the later grant (no stock) and its give-back ends it.
      short = short + 1
    end
  end
end
-- The gate makes results and buyers without an expiry (it stays lean); they go
-- with the rest of the sale's keys.
redis.call('PEXPIREAT', KEYS[2], ARGV[2])
redis.call('PEXPIREAT', KEYS[3], ARGV[2])
return short
