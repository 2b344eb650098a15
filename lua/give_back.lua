-- Ends an order that will never be persisted: result "failed", its stock and buyer
-- slot given back as asked, message acknowledged, all in one step.
-- KEYS[1] stock   KEYS[2] buyers   KEYS[3] results   KEYS[4] orders stream   KEYS[5] dlq
-- ARGV[1] order id   ARGV[2] user id   ARGV[3] reason   ARGV[4] stream entry id
-- ARGV[5] group   ARGV[6] flags: 's' give stock back, 'b' give buyer slot back,
--                 'd' copy to the dead-letter stream
-- ARGV[7] events channel   ARGV[8] voucher id
-- Returns 1 when it acted, 0 when the entry was already acknowledged (another
-- worker got there first), so stock is never given back twice.
if redis.call('XACK', KEYS[4], ARGV[5], ARGV[4]) == 0 then return 0 end
local flags = ARGV[6]
-- Without a stock key Redis lost the voucher; warm-up rebuilds it from the database,
-- and an INCR here would create a stock of 1 that warm-up then takes as the truth.
if string.find(flags, 's', 1, true) and redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('INCR', KEYS[1]) == 1 then
    redis.call('PUBLISH', ARGV[7], 'restock:' .. ARGV[8])
  end
end
if string.find(flags, 'b', 1, true) then redis.call('SREM', KEYS[2], ARGV[2]) end
redis.call('HSET', KEYS[3], ARGV[1], 'failed:' .. ARGV[2] .. ':' .. ARGV[3])
if string.find(flags, 'd', 1, true) then
  redis.call('XADD', KEYS[5], '*', 'order', ARGV[1], 'user', ARGV[2], 'reason', ARGV[3])
  redis.call('PUBLISH', ARGV[7], 'dead_letter:' .. ARGV[8] .. ':' .. ARGV[1])
end
return 1
