-- Ends an order that will never be persisted: result "failed", its unit and buyer
-- slot given back as asked, message acknowledged, all in one step.
-- KEYS[1] stock   KEYS[2] buyers   KEYS[3] results   KEYS[4] orders stream   KEYS[5] dlq
-- KEYS[6] window (its `expires` is when the sale's keys expire)
-- ARGV[1] order id   ARGV[2] user id   ARGV[3] stream entry id   ARGV[4] group
-- ARGV[5] the failed result to store   ARGV[6] '1': give the unit back
-- ARGV[7] '1': free the buyer slot   ARGV[8] dead-letter reason ('' : no dead letter)
-- ARGV[9] events channel   ARGV[10] restock event   ARGV[11] dead-letter event
-- (results and events are written by Rust: src/orders/give_back.rs says which)
-- Returns 1 when it acted, 0 when the entry was already acknowledged (another
-- worker got there first), so stock is never given back twice.
if redis.call('XACK', KEYS[4], ARGV[4], ARGV[3]) == 0 then return 0 end
-- An order without a result was granted before Redis lost the voucher: the rebuild
-- (from a database without it) already counts its unit as unsold and its shopper
-- as no buyer, and the slot may be the shopper's newer grant. Nothing goes back.
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then
  unit_back(KEYS[1], KEYS[2], ARGV[2], ARGV[1], ARGV[6] == '1', ARGV[7] == '1', ARGV[9], ARGV[10])
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[5])
if ARGV[8] ~= '' then
  redis.call('XADD', KEYS[5], '*', 'order', ARGV[1], 'user', ARGV[2], 'reason', ARGV[8])
  redis.call('PUBLISH', ARGV[9], ARGV[11])
end
expire_with_sale(KEYS[6], {KEYS[3], KEYS[5]})
return 1
