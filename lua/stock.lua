-- An operator's stock change, once: adds units, or withdraws units nobody was granted
-- (all asked for, or none). The database holds the change's row; this is Redis's step.
-- KEYS[1] stock   KEYS[2] changes made (change id -> units)   KEYS[3] window
-- ARGV[1] change id   ARGV[2] units (> 0 adds, < 0 withdraws)   ARGV[3] events channel
-- ARGV[4] the restocked event
-- Returns the units the change made: ARGV[2], or 0 for a withdrawal of more than is
-- unsold; the same answer however often it is asked. Returns false when Redis does not
-- hold the voucher: it is rebuilt from the database first (sale::warm).
local done = redis.call('HGET', KEYS[2], ARGV[1])
if done then return tonumber(done) end
local stock = redis.call('GET', KEYS[1])
if not stock then return false end
local units, made = tonumber(ARGV[2]), 0
if units > 0 then
  redis.call('INCRBY', KEYS[1], units)
  -- Every process clears its sold-out flag and shop pages show the stock back.
  redis.call('PUBLISH', ARGV[3], ARGV[4])
  made = units
elseif tonumber(stock) >= -units then
  redis.call('DECRBY', KEYS[1], -units)
  made = units
end
redis.call('HSET', KEYS[2], ARGV[1], made)
local expires = redis.call('HGET', KEYS[3], 'expires')
if expires and redis.call('PTTL', KEYS[2]) == -1 then redis.call('PEXPIREAT', KEYS[2], expires) end
return made
