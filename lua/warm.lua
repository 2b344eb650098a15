-- Warm-up: loads one voucher into Redis unless Redis already holds it, and makes
-- every key of its sale expire after the drain grace.
-- KEYS[1] stock   KEYS[2] buyers   KEYS[3] window   KEYS[4] orders stream
-- KEYS[5] results   KEYS[6] dlq   KEYS[7] refusals counter
-- ARGV[1] stock left   ARGV[2] begins (ms)   ARGV[3] ends (ms)
-- ARGV[4] when the sale's keys expire (ms)   ARGV[5..] buyer ids
-- Returns 1 when it loaded the voucher, 0 when Redis already had it. Never touches
-- stock Redis holds: that would resurrect units sold since the database was read.
-- Keys made later get the same expiry: refusals from the gate, dead letters from the
-- give-back (both read it from the window's `expires`), results and buyers from the
-- worker's batches.
redis.call('HSET', KEYS[3], 'begins', ARGV[2], 'ends', ARGV[3], 'expires', ARGV[4])
local loaded = 0
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
  local chunk = 1000
  for i = 5, #ARGV, chunk do
    redis.call('SADD', KEYS[2], unpack(ARGV, i, math.min(i + chunk - 1, #ARGV)))
  end
  redis.call('SET', KEYS[1], ARGV[1])
  loaded = 1
end
for i = 1, #KEYS do
  redis.call('PEXPIREAT', KEYS[i], ARGV[4])
end
return loaded
