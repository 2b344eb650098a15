-- Takes a block of order id counter values for one UTC day. Returns the block's last value.
--
-- KEYS[1]  the day's counter
-- KEYS[2]  its master mark: the replication id of the master that took its last block
--          (in the counter's slot)
-- ARGV[1]  block size
-- ARGV[2]  the caller's floor: the highest value this process has taken today
-- ARGV[3]  margin added when the counter may have lost values
-- ARGV[4]  expiry of the counter, seconds
-- ARGV[5]  counter values per millisecond of the day for a counter made afresh
--
-- A counter can only go backwards when Redis lost it (a restart without persistence)
-- or lost its last writes (a failover: the promoted replica had not received them).
-- Other processes may still hold the blocks lost, so:
-- * a counter made afresh starts from the time of day (ARGV[5] values per elapsed
--   millisecond, faster than any gate can grant);
-- * a counter whose last block was taken under another master (a failover since, or
--   a restart: every master has a replication id of its own, and a promoted replica
--   takes a new one) jumps ahead by the margin, past what the old master handed out
--   that never reached this one, and at least to where a counter made afresh would
--   start;
-- * a counter behind what this caller has already taken jumps past it by the margin.
-- Ids also carry the grab's second, so a reused counter value would have to meet the
-- same second as well.
local master = string.match(redis.call('INFO', 'replication'), 'master_replid:(%w+)') or '?'
local margin = tonumber(ARGV[3])
local function time_of_day()
  local t = redis.call('TIME')
  local ms_of_day = (tonumber(t[1]) % 86400) * 1000 + math.floor(tonumber(t[2]) / 1000)
  return ms_of_day * tonumber(ARGV[5])
end
local cur = tonumber(redis.call('GET', KEYS[1]))
if not cur then
  cur = time_of_day()
elseif redis.call('GET', KEYS[2]) ~= master then
  cur = math.max(cur + margin, time_of_day())
end
local floor = tonumber(ARGV[2])
if cur < floor then
  cur = floor + margin
end
local last = cur + tonumber(ARGV[1])
redis.call('SET', KEYS[1], last, 'EX', ARGV[4])
redis.call('SET', KEYS[2], master, 'EX', ARGV[4])
return last
