-- One step of a credential check against its counters, shared by every process:
-- src/auth/attempts.rs owns them and says why they are shaped so.
-- KEYS[1] the gating counter (an address's, or one account's from one address)
-- KEYS[2] optional: the account's own counter (every address's failures at it)
-- Each counter is a hash: `n` failures (a check begun counts as one until it is
-- refunded), `until` (ms) no check before then.
-- ARGV[1] mode: 'peek' (only say whether a check may go ahead), 'begin' (may it go
--         ahead? then count it as a failure until refunded), 'refund' (it succeeded)
-- ARGV[2] failures allowed before waits begin   ARGV[3] the first wait (ms)
-- ARGV[4] the longest wait (ms)   ARGV[5] how long a count lasts after its last change (ms)
-- ARGV[6] the account's failures before it slows the addresses that failed at it
-- Returns 0 when the check may go ahead, or how many ms to wait (counting nothing).
-- The failure that reaches the allowance sets the first wait; each one after doubles it.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mode, free, first, longest, window = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local account, account_free = KEYS[2], tonumber(ARGV[6] or '0')

local function count(key, allowance)
  local n = redis.call('HINCRBY', key, 'n', 1)
  if n >= allowance then
    redis.call('HSET', key, 'until', now + math.floor(math.min(first * 2 ^ (n - allowance), longest)))
  end
  redis.call('PEXPIRE', key, window)
end

local function refund(key, allowance)
  local n = redis.call('HINCRBY', key, 'n', -1)
  if n <= 0 then
    redis.call('DEL', key)
  elseif n < allowance then
    redis.call('HDEL', key, 'until')
  end
end

if mode == 'refund' then
  -- A success from this address: its count at the account starts again.
  if account then
    redis.call('DEL', KEYS[1])
    refund(account, account_free)
  else
    refund(KEYS[1], free)
  end
  return 0
end

local locked = tonumber(redis.call('HGET', KEYS[1], 'until') or '0')
if locked > now then return locked - now end
if account then
  -- The account's own slowdown holds back only addresses that have failed at it: its
  -- right holder, from an address without failures, goes ahead.
  local busy = tonumber(redis.call('HGET', account, 'until') or '0')
  local failed_here = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
  if busy > now and failed_here > 0 then return busy - now end
end
if mode == 'begin' then
  count(KEYS[1], free)
  if account then count(account, account_free) end
end
return 0
