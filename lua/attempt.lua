-- One step of a credential check against its counters, shared by every process:
-- src/auth/attempts.rs owns them and says why they are shaped so.
-- KEYS[1] the gating counter (an address's, or one account's from one address)
-- KEYS[2] optional: the account's own counter (every address's failures at it)
-- Each counter is a hash: `n` failures, `last` (ms) the last one, `until` (ms) no
-- check before then, and a field `w:<check>` (ms: when it began) per check under way
-- (begun, not finished); the account's also `since` (ms): when its current slowdown
-- began.
-- ARGV[1] mode:
--   'peek'    may a check go ahead? (counts nothing)
--   'begin'   may a check go ahead? then it is under way (with those under way and the
--             failures, at most the allowance)
--   'fail'    a check begun failed ('fail_now': one not begun, checked as 'begin' is)
--   'succeed' a check begun succeeded: the account's count from this address starts again
--   'end'     a check begun ended without an outcome (its caller went away, it timed
--             out, an error; once its hash, if it began, is done): its place is given
--             back, nothing counted
-- ARGV[2] failures allowed before waits begin   ARGV[3] the first wait (ms)
-- ARGV[4] the longest wait (ms)   ARGV[5] how long a spent allowance's count lasts after
--         its last change (ms); one under its allowance, that share of it per failure
-- ARGV[6] the account's failures before it slows the addresses that fail at it
-- ARGV[7] how long a check may stay under way (ms): past it, a check whose process
--         died no longer holds a place (each place ages on its own: others beginning
--         renew nothing)
-- ARGV[8] the check's own id (its place's field)
-- Returns 0 when the check may go ahead, or how many ms to wait (counting nothing).
-- The failure that reaches the allowance sets the first wait; each one after doubles it.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mode, free, first, longest, window = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local account, account_free, under_way_ms = KEYS[2], tonumber(ARGV[6] or '0'), tonumber(ARGV[7] or '60000')
local gate, place = KEYS[1], 'w:' .. (ARGV[8] or '')

local function num(key, field)
  return tonumber(redis.call('HGET', key, field) or '0')
end

-- Checks under way, forgetting each that began longer ago than a check may take.
local function under_way(key)
  local fields, n = redis.call('HGETALL', key), 0
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, 2) == 'w:' then
      if now - tonumber(fields[i + 1]) > under_way_ms then
        redis.call('HDEL', key, fields[i])
      else
        n = n + 1
      end
    end
  end
  return n
end

local function failed(key, allowance)
  local n = redis.call('HINCRBY', key, 'n', 1)
  redis.call('HSET', key, 'last', now)
  if n >= allowance then
    local waited = num(key, 'until')
    if waited <= now then redis.call('HSET', key, 'since', now) end
    redis.call('HSET', key, 'until', now + math.floor(math.min(first * 2 ^ (n - allowance), longest)))
  end
  -- Kept for the allowance's share of the window per failure, the whole window once it
  -- is spent: a guesser waiting out each count gets no more than an allowance a
  -- window, as with the whole window, while a failure from an address never seen
  -- again (a guesser walking addresses) is forgotten in that share of it.
  redis.call('PEXPIRE', key, math.max(math.floor(window * math.min(n, allowance) / allowance), under_way_ms))
end

local function finished(key)
  redis.call('HDEL', key, place)
end

-- How long a check from here must wait: this counter's own wait, or the account's
-- slowdown, which holds back only addresses that failed at it since it began (its
-- right holder, from an address without such failures, goes ahead).
local function wait()
  local locked = num(gate, 'until')
  if locked > now then return locked - now end
  if account then
    local busy = num(account, 'until')
    if busy > now and num(gate, 'n') > 0 and num(gate, 'last') >= num(account, 'since') then
      return busy - now
    end
  end
  return 0
end

if mode == 'end' then
  finished(gate)
  return 0
end
if mode == 'succeed' then
  finished(gate)
  if account then redis.call('DEL', gate) end
  return 0
end
if mode == 'fail' then
  finished(gate)
  failed(gate, free)
  if account then failed(account, account_free) end
  return 0
end

local w = wait()
if w > 0 then return w end
if mode == 'fail_now' then
  failed(gate, free)
  if account then failed(account, account_free) end
elseif mode == 'begin' then
  -- Under way at once: no more than the failures still allowed, or one at a time
  -- once the allowance is spent (a check after each wait).
  if under_way(gate) >= math.max(free - num(gate, 'n'), 1) then return 1000 end
  redis.call('HSET', gate, place, now)
  -- Kept while the place may be (a counter with failures already outlives it).
  if redis.call('PTTL', gate) < under_way_ms then redis.call('PEXPIRE', gate, under_way_ms) end
end
return 0
