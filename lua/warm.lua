-- Warm-up: loads one voucher into Redis unless Redis already holds it, and makes
-- every key of its sale expire after the drain grace.
-- KEYS[1] stock   KEYS[2] buyers   KEYS[3] window   KEYS[4] orders stream
-- KEYS[5] results   KEYS[6] dlq   KEYS[7] refusals counter   KEYS[8] restocked orders
-- ARGV[1] begins (ms)   ARGV[2] ends (ms)   ARGV[3] when the sale's keys expire (ms)
-- ARGV[4] stock left, ARGV[5] how many buyers, then the buyer ids, then the ids of
-- cancelled orders (their units are in the stock left): the database's snapshot.
-- Without it the script only looks: it loads nothing when Redis lost the voucher.
-- Returns 1 when Redis already held the voucher, 0 when it did not (and loaded the
-- snapshot if given). Never touches stock Redis holds: that would resurrect units sold
-- since the database was read.
-- Keys made later get the same expiry: refusals from the gate, dead letters from the
-- give-back (both read it from the window's `expires`), results and buyers from the
-- worker's batches.
local held = redis.call('EXISTS', KEYS[1])
if held == 0 then
  if #ARGV < 4 then
    return 0
  end
  redis.call('DEL', KEYS[2], KEYS[8])
  local first, last = 6, 5 + tonumber(ARGV[5])
  local chunk = 1000
  for i = first, last, chunk do
    redis.call('SADD', KEYS[2], unpack(ARGV, i, math.min(i + chunk - 1, last)))
  end
  for i = last + 1, #ARGV, chunk do
    redis.call('SADD', KEYS[8], unpack(ARGV, i, math.min(i + chunk - 1, #ARGV)))
  end
  redis.call('SET', KEYS[1], ARGV[4])
end
redis.call('HSET', KEYS[3], 'begins', ARGV[1], 'ends', ARGV[2], 'expires', ARGV[3])
for i = 1, #KEYS do
  redis.call('PEXPIREAT', KEYS[i], ARGV[3])
end
return held
