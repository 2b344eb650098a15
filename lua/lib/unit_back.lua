-- The core both give-backs share (`fail.lua`: an order never persisted;
-- `give_back.lua`: a cancelled order), prepended to each when it is loaded
-- (`backend::layout::Scripts`).

-- Puts one unit back on sale when `gives_back` and frees the shopper's buyer slot when
-- `frees_slot` and the slot holds this order (`order`; not the shopper's other order, a
-- grant made again after Redis lost the sale: freeing it would let them grab a second
-- unit, which the database would refuse). A unit that goes back is announced on
-- `channel`, so every process clears its sold-out flag and dashboards log it. Without
-- a stock key Redis lost the voucher: its rebuild reads the database, which already
-- counts the unit, and an INCR here would create a stock of 1 that the rebuild would
-- then take as the truth.
local function unit_back(stock, buyers, user, order, gives_back, frees_slot, channel, restocked_event)
  if gives_back then
    if redis.call('EXISTS', stock) == 1 then redis.call('INCR', stock) end
    redis.call('PUBLISH', channel, restocked_event)
  end
  if frees_slot and redis.call('HGET', buyers, user) == order then
    redis.call('HDEL', buyers, user)
  end
end

-- Gives each key that has no expiry the sale's (the window's `expires`), so a key a
-- give-back creates never outlives the sale.
local function expire_with_sale(window, keys)
  local expires = redis.call('HGET', window, 'expires')
  if not expires then return end
  for _, key in ipairs(keys) do
    if redis.call('PTTL', key) == -1 then redis.call('PEXPIREAT', key, expires) end
  end
end
