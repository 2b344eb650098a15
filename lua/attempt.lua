-- One credential check against one counter (an account's, an address's, the admin
-- token's), shared by every process: src/auth/attempts.rs owns it.
-- KEYS[1] the counter (hash: `n` attempts in the window, `until` locked until, ms)
-- ARGV[1] attempts allowed before waits begin   ARGV[2] the first wait (ms)
-- ARGV[3] the longest wait (ms)   ARGV[4] how long the count lasts after the last attempt (ms)
-- ARGV[5] '1': count this attempt; '0': only look whether it must wait
-- Returns 0 when the check may go ahead (and counts it if asked), or how many ms to
-- wait (and counts nothing). Each attempt past the allowance doubles the wait before
-- the next.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local locked = tonumber(redis.call('HGET', KEYS[1], 'until') or '0')
if locked > now then return locked - now end
if ARGV[5] ~= '1' then return 0 end
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
local free = tonumber(ARGV[1])
if n > free then
  local wait = math.min(tonumber(ARGV[2]) * 2 ^ (n - free - 1), tonumber(ARGV[3]))
  redis.call('HSET', KEYS[1], 'until', now + math.floor(wait))
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 0
