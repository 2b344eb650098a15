-- An operator's stock change, or half of a move between a sale's buckets, once, in
-- one bucket: adds units, or withdraws units nobody was granted
-- (all asked for, or none). The database holds the change's row; this is Redis's step.
-- KEYS[1] stock   KEYS[2] changes made (change id -> units)   KEYS[3] window
-- ARGV[1] change id   ARGV[2] units (> 0 adds, < 0 withdraws)   ARGV[3] events channel
-- ARGV[4] the restocked event ('' for none: a move of units between a sale's buckets)
-- ARGV[5] the Redis layout the caller speaks (`backend::layout_version`)
-- Returns the units the change made: ARGV[2], or 0 for a withdrawal of more than is
-- unsold; the same answer however often it is asked. Returns false when Redis does not
-- hold the voucher: it is rebuilt from the database first (sale::warm). A sale warmed
-- in a newer layout is left alone: the call fails with `LAYOUT <its layout>`, and the
-- change stays owed; one in an older layout is not held (false: rebuilt, in this one).
local layout = redis.call('HGET', KEYS[3], 'layout')
if layout and tonumber(layout) > tonumber(ARGV[5]) then return redis.error_reply('LAYOUT ' .. layout) end
if tonumber(layout or '1') < tonumber(ARGV[5]) then return false end
local done = redis.call('HGET', KEYS[2], ARGV[1])
local made = 0
if done then
  made = tonumber(done)
else
  local stock = redis.call('GET', KEYS[1])
  if not stock then return false end
  local units = tonumber(ARGV[2])
  if units > 0 then
    redis.call('INCRBY', KEYS[1], units)
    -- Every process clears its sold-out flag and shop pages show the stock back.
    if ARGV[4] ~= '' then redis.call('PUBLISH', ARGV[3], ARGV[4]) end
    made = units
  elseif tonumber(stock) >= -units then
    redis.call('DECRBY', KEYS[1], -units)
    made = units
  end
  redis.call('HSET', KEYS[2], ARGV[1], made)
end
-- A write every time, even when the change was made before: the `WAIT` that follows
-- in the same pipeline then covers that earlier change as well (a master replicates
-- its writes in one ordered stream), whoever made it.
local expires = redis.call('HGET', KEYS[3], 'expires')
if expires then redis.call('PEXPIREAT', KEYS[2], expires) end
return made
