-- Counts grabs refused outside the gate on a bucket's refusals counter, the one the
-- gate counts its own on (read by the live dashboard): a sale of several shards whose
-- dry bucket's refill found it sold out (`sale::grab`). The gate answered those grabs
-- `dry`, not a refusal, so it counted nothing.
-- KEYS[1] the bucket's refusals counter   KEYS[2] its window
-- ARGV[1] how many
-- A counter made here expires with the sale, as the gate's does; a bucket Redis lost
-- (no window) is not counted, so no key is left without an expiry.
local expires = redis.call('HGET', KEYS[2], 'expires')
if not expires then return 0 end
local n = tonumber(ARGV[1])
if redis.call('INCRBY', KEYS[1], n) == n then
  redis.call('PEXPIREAT', KEYS[1], expires)
end
return n
