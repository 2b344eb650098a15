-- Settles a batch of orders the database has just committed: results `success`,
-- stream entries acknowledged, and Redis's books squared with the database's.
-- KEYS[1] stock   KEYS[2] buyers   KEYS[3] results   KEYS[4] orders stream
-- KEYS[5] restocked (cancelled orders whose unit Redis took back)   KEYS[6] window
-- ARGV[1] consumer group   ARGV[2] when the sale's keys expire (ms), unless the
-- window says (an operator may have moved the sale's end since the worker read it)
-- ARGV[3..] four per order: entry id, order id, user id, result value
-- Returns how many orders found the stock already at 0 (see below).
--
-- The gate writes every grant's result in the same step as it takes the unit and
-- the buyer slot, and a rebuild writes the result of every order the database had
-- (`warm.lua`), so a result in `results` means this order's unit and slot are in
-- Redis's books. An order without one was granted before Redis lost the voucher and
-- was rebuilt from a database that had not yet committed it (it was in a worker's
-- hands): the rebuilt stock still counts its unit, so take it now, and the slot.
-- Rebuilds run under the database's write lock, so this order committed after the
-- rebuild's snapshot and after Redis held the rebuilt voucher. Whether the buyer is
-- in `buyers` says nothing here: the shopper may have grabbed again since the
-- rebuild (that later grant is refused by the database and gives its own unit back).
-- Its unit is taken even when the order was cancelled the moment it was committed:
-- that give-back added the unit to a stock that counted it already (only its buyer
-- slot stays free). A voucher Redis does not hold is left alone: its rebuild will
-- read this order from the database.
local known = redis.call('EXISTS', KEYS[1]) == 1
local short = 0
-- One command of each kind per chunk of orders, not one per order: a call costs
-- Redis more than the work it does for one order. A chunk's arguments stay well
-- inside what unpack can hand over (Lua's C stack: 8000 values).
local chunk = 1000
for first = 3, #ARGV, 4 * chunk do
  local last = math.min(first + 4 * chunk - 1, #ARGV)
  local results, entries, orders = {}, {}, {}
  for i = first, last, 4 do
    entries[#entries + 1] = ARGV[i]
    orders[#orders + 1] = ARGV[i + 1]
    results[#results + 1] = ARGV[i + 1]
    results[#results + 1] = ARGV[i + 3]
  end
  -- Nearly always every order has its result, and one HMGET says so.
  local had = known and redis.call('HMGET', KEYS[3], unpack(orders)) or {}
  redis.call('HSET', KEYS[3], unpack(results))
  redis.call('XACK', KEYS[4], ARGV[1], unpack(entries))
  for j = 1, #had do
    local i = first + 4 * (j - 1)
    if not had[j] then
      -- (An order cancelled the moment it was committed holds no slot: its give-back
      -- came first, and found the slot not its own.)
      if redis.call('SISMEMBER', KEYS[5], ARGV[i + 1]) == 0 then
        redis.call('HSET', KEYS[2], ARGV[i + 2], ARGV[i + 1])
      end
      if tonumber(redis.call('GET', KEYS[1])) > 0 then
        redis.call('DECR', KEYS[1])
      else
        -- Redis granted the unit again before this order settled; the database
        -- refuses the later grant (no stock) and its give-back ends it.
        short = short + 1
      end
    end
  end
end
-- The gate makes results and buyers without an expiry (it stays lean); they go
-- with the rest of the sale's keys.
local expires = redis.call('HGET', KEYS[6], 'expires') or ARGV[2]
redis.call('PEXPIREAT', KEYS[2], expires)
redis.call('PEXPIREAT', KEYS[3], expires)
return short
