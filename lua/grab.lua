-- The seckill gate: decides the grabs of one sale that arrived together, each
-- atomically, in the order given (src/sale/batches.rs gathers them: one call's fixed
-- cost, a script's start and its reads of the sale, is shared by all).
-- KEYS[1] stock   KEYS[2] buyers (shopper -> their order id)   KEYS[3] window   KEYS[4] orders stream   KEYS[5] results
-- KEYS[6] refusals counter (read by the live dashboard): every key one bucket's, of a
-- sale split over several shards (each grab's shopper belongs to this bucket)
-- ARGV[1] voucher id   ARGV[2] events channel   ARGV[3] the sold-out event to publish
-- ARGV[4] the sale's shards as the caller knows them (a bucket's shoppers are a hash of
-- the ids over that many: asked with another count, nothing is decided and every grab
-- answers 'shards:<the count>')
-- ARGV[5] the Redis layout the caller speaks (`backend::layout_version`): a sale warmed
-- in a newer one is not decided, and every grab answers 'layout:<its layout>'; one
-- warmed in an older one is not held (every grab answers 'unknown_voucher': the caller
-- rebuilds it from the database, in this layout)
-- then four per grab: user id, order id (the stream entry's format: src/orders/entry.rs),
-- the result to store when granted (written by Rust: src/orders/results.rs), and the
-- shopper's grab token ('' when none), checked when the sale has a fair start (`fair`
-- in the window): `token.lua` issues it from the start instant only.
-- Returns one reply per grab, in order: 'granted' or the refusal's API error code
-- (src/sale/gate.rs reads them; 'already_bought:<the order id>'), or 'dry': the bucket has no unit left while the sale
-- has several (units move to it, `sale::refill`, and the grab is asked again; a sale of
-- one shard answers 'sold_out' and publishes it here).
-- Time comes from Redis TIME so every app instance agrees. A paused sale refuses
-- here, in the same step, so no grant follows a pause that has returned.
local out = {}
local function all(code)
  for _ = 6, #ARGV, 4 do out[#out + 1] = code end
  return out
end
local stock = redis.call('GET', KEYS[1])
if not stock then return all('unknown_voucher') end
stock = tonumber(stock)
local window = redis.call('HMGET', KEYS[3], 'begins', 'ends', 'expires', 'paused', 'price', 'fair', 'secret', 'shards',
  'layout', 'ended')
if not window[1] or not window[2] then return all('unknown_voucher') end
local layout = tonumber(window[9] or '1')
if layout > tonumber(ARGV[5]) then return all('layout:' .. window[9]) end
if layout < tonumber(ARGV[5]) then return all('unknown_voucher') end
local shards = window[8] or '1'
if shards ~= ARGV[4] then return all('shards:' .. shards) end
local one_shard = shards == '1'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local begins, ends = tonumber(window[1]), tonumber(window[2])
-- `ended`: the end a sale of several shards was over at by its bucket 0's clock.
local over = tonumber(window[10]) == ends
local refused, granted = 0, 0
local function refuse(code)
  refused = refused + 1
  return code
end

local function decide(user, order, result, token)
  -- This very grab sent again (its connection died before the answer came back): it
  -- was granted, whatever has changed since. A refused grab is decided afresh.
  if redis.call('HEXISTS', KEYS[5], order) == 1 then return 'granted' end
  if now < begins then return refuse('not_started') end
  -- Checked before the rest: a buyer asking again (their grab's answer lost) is told
  -- the order they hold, not "sold out", "ended" or "paused" by what came after it.
  local held = redis.call('HGET', KEYS[2], user)
  if held then return refuse('already_bought:' .. held) end
  if now >= ends or over then return refuse('ended') end
  if window[4] == '1' then return refuse('sale_paused') end
  if window[6] == '1' and token ~= grab_token(window[7] or '', user, ARGV[1]) then
    return refuse('invalid_token')
  end
  if stock <= 0 then
    if one_shard then return refuse('sold_out') end
    return 'dry'
  end
  stock = stock - 1
  granted = granted + 1
  redis.call('HSET', KEYS[2], user, order)
  -- The price as it is at this grab: an operator's later change does not reach it.
  redis.call('XADD', KEYS[4], '*', 'order', order, 'user', user, 'voucher', ARGV[1], 'price', window[5] or '')
  redis.call('HSET', KEYS[5], order, result)
  return 'granted'
end

for i = 6, #ARGV, 4 do
  out[#out + 1] = decide(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3])
end
-- The units this call granted, taken at once; buyers and results get their expiry
-- from the worker, once a batch, not here on every grant.
if granted > 0 then
  redis.call('DECRBY', KEYS[1], granted)
  if stock == 0 and one_shard then
    -- The sale's first sell-out, by the gate's clock, for the report (kept once).
    redis.call('HSETNX', KEYS[3], 'sold_out_at', now)
    redis.call('PUBLISH', ARGV[2], ARGV[3])
  end
end
-- The refusals counter expires with the rest of the sale (see warm.lua).
if refused > 0 and redis.call('INCRBY', KEYS[6], refused) == refused and window[3] then
  redis.call('PEXPIREAT', KEYS[6], window[3])
end
return out
