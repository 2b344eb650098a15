-- Takes a block of order id counter values for one UTC day. Returns the block's last value.
--
-- KEYS[1]  the day's counter
-- ARGV[1]  block size
-- ARGV[2]  the caller's floor: the highest value this process has taken today
-- ARGV[3]  margin added when the counter is found behind the caller's floor
-- ARGV[4]  expiry of the counter, seconds
-- ARGV[5]  counter values per millisecond of the day for a counter made afresh
--
-- A counter can only go backwards when Redis lost it (restart without persistence,
-- failover). Other processes may still hold blocks taken before the loss, so a counter
-- made afresh starts from the time of day (ARGV[5] values per elapsed millisecond,
-- faster than any gate can grant), and a counter behind what this caller has already
-- taken jumps past it by a margin. Ids also carry the grab's second, so a reused
-- counter value would have to meet the same second as well.
local cur = tonumber(redis.call('GET', KEYS[1]))
if not cur then
  local t = redis.call('TIME')
  local ms_of_day = (tonumber(t[1]) % 86400) * 1000 + math.floor(tonumber(t[2]) / 1000)
  cur = ms_of_day * tonumber(ARGV[5])
end
local floor = tonumber(ARGV[2])
if cur < floor then
  cur = floor + tonumber(ARGV[3])
end
local last = cur + tonumber(ARGV[1])
redis.call('SET', KEYS[1], last, 'EX', ARGV[4])
return last
