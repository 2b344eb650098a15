-- The seckill gate: decides one grab atomically.
-- KEYS[1] stock   KEYS[2] buyers   KEYS[3] window   KEYS[4] orders stream   KEYS[5] results
-- KEYS[6] refusals counter (read by the live dashboard)
-- ARGV[1] user id   ARGV[2] order id   ARGV[3] voucher id (the stream entry's format: src/orders/entry.rs)
-- ARGV[4] events channel
-- ARGV[5] the result to store when granted   ARGV[6] the sold-out event to publish
-- (both written by Rust: src/orders/results.rs, src/bus/event.rs)
-- ARGV[7] the shopper's grab token ('' when none), checked when the sale has a fair
-- start (`fair` in the window): `token.lua` issues it from the start instant only.
-- Returns 'granted' or the refusal's API error code (src/sale/gate.rs reads it).
-- Time comes from Redis TIME so every app instance agrees. A paused sale refuses
-- here, in the same step, so no grant follows a pause that has returned.
local stock = redis.call('GET', KEYS[1])
if not stock then return 'unknown_voucher' end
-- This very grab sent again (its connection died before the answer came back): it
-- was granted, whatever has changed since. A refused grab is decided afresh.
if redis.call('HEXISTS', KEYS[5], ARGV[2]) == 1 then return 'granted' end

local window = redis.call('HMGET', KEYS[3], 'begins', 'ends', 'expires', 'paused', 'price', 'fair', 'secret')
if not window[1] or not window[2] then return 'unknown_voucher' end
-- The refusals counter expires with the rest of the sale (see warm.lua); buyers and
-- results get their expiry from the worker, once a batch, not here on every grant.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function refuse(code)
  if redis.call('INCR', KEYS[6]) == 1 and window[3] then redis.call('PEXPIREAT', KEYS[6], window[3]) end
  return code
end
if now < tonumber(window[1]) then return refuse('not_started') end
if now >= tonumber(window[2]) then return refuse('ended') end
if window[4] == '1' then return refuse('sale_paused') end
if window[6] == '1' and ARGV[7] ~= grab_token(window[7] or '', ARGV[1], ARGV[3]) then
  return refuse('invalid_token')
end

-- Checked before stock: a buyer asking again is told they have it, not "sold out".
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return refuse('already_bought') end
if tonumber(stock) <= 0 then return refuse('sold_out') end

local left = redis.call('DECR', KEYS[1])
redis.call('SADD', KEYS[2], ARGV[1])
-- The price as it is at this grab: an operator's later change does not reach it.
redis.call('XADD', KEYS[4], '*', 'order', ARGV[2], 'user', ARGV[1], 'voucher', ARGV[3], 'price', window[5] or '')
redis.call('HSET', KEYS[5], ARGV[2], ARGV[5])
if left == 0 then
  -- The sale's first sell-out, by the gate's clock, for the report (kept once).
  redis.call('HSETNX', KEYS[3], 'sold_out_at', now)
  redis.call('PUBLISH', ARGV[4], ARGV[6])
end
return 'granted'
