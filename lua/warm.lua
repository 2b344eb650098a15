-- Warm-up: loads one voucher into Redis unless Redis already holds it.
-- KEYS[1] stock   KEYS[2] buyers   KEYS[3] window
-- ARGV[1] stock left   ARGV[2] begins (ms)   ARGV[3] ends (ms)   ARGV[4..] buyer ids
-- Returns 1 when it loaded the voucher, 0 when Redis already had it. Never touches
-- stock Redis holds: that would resurrect units sold since the database was read.
redis.call('HSET', KEYS[3], 'begins', ARGV[2], 'ends', ARGV[3])
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('DEL', KEYS[2])
local chunk = 1000
for i = 4, #ARGV, chunk do
  redis.call('SADD', KEYS[2], unpack(ARGV, i, math.min(i + chunk - 1, #ARGV)))
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
