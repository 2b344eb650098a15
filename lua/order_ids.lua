-- Takes a block of order id counter values for one UTC day. Returns the block's last
-- value and how it was taken: 0 as asked, 1 jumped ahead (the counter was last written
-- under another master), -1 the master's replication id was refused to this script
-- (`INFO`: an ACL without it), so a failover's lost blocks are not jumped past.
--
-- KEYS[1]  the day's counter
-- KEYS[2]  its master mark: `<replication id> <ms>`, the master that took its last
--          block and when, by its clock (in the counter's slot)
-- ARGV[1]  block size
-- ARGV[2]  the caller's floor: the highest value this process has taken today
-- ARGV[3]  margin added when the counter may have lost values
-- ARGV[4]  expiry of the counter, seconds
-- ARGV[5]  counter values per millisecond of the day for a counter made afresh
-- ARGV[6]  how many values the counter counts: a block past them is refused, and not
--          written (the caller draws from the day's other counter; `order_ids.rs`)
--
-- A counter can only go backwards when Redis lost it (a restart without persistence)
-- or lost its last writes (a failover: the promoted replica had not received them; a
-- restart from a file missing its last second). Other processes may still hold the
-- blocks lost, so:
-- * a counter made afresh starts from the time of day (ARGV[5] values per elapsed
--   millisecond, faster than any gate grants on average);
-- * a counter whose last block was taken under another master (every master has a
--   replication id of its own: a promoted replica and a restarted master take a new
--   one) jumps ahead by the margin, and by ARGV[5] values per millisecond since that
--   block, past what was handed out since under masters whose writes it never
--   received (a second failover soon after the first, or a crash loop, loses the
--   first jump's blocks too: the time covers them), and at least to where a counter
--   made afresh would start;
-- * a counter behind what this caller has already taken jumps past it by the margin.
-- Ids also carry the grab's second, so a reused counter value would have to meet the
-- same second as well.
local per_ms, margin = tonumber(ARGV[5]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ms_of_day = now % 86400000
local info = redis.pcall('INFO', 'replication')
local master = type(info) == 'string' and string.match(info, 'master_replid:(%w+)')
local how = master and 0 or -1
local cur = tonumber(redis.call('GET', KEYS[1]))
if not cur then
  cur = ms_of_day * per_ms
elseif master then
  local mark = redis.call('GET', KEYS[2])
  local by, at = string.match(mark or '', '^(%w+) (%d+)$')
  if by ~= master then
    -- Since the last block known here, at most the day so far.
    local since = math.min(math.max(now - tonumber(at or now), 0), ms_of_day)
    cur = math.max(cur + margin + since * per_ms, ms_of_day * per_ms)
    how = 1
  end
end
local floor = tonumber(ARGV[2])
if cur < floor then
  cur = floor + margin
end
local last = cur + tonumber(ARGV[1])
if last >= tonumber(ARGV[6]) then
  return {last, how}
end
redis.call('SET', KEYS[1], last, 'EX', ARGV[4])
if master then redis.call('SET', KEYS[2], string.format('%s %d', master, now), 'EX', ARGV[4]) end
return {last, how}
