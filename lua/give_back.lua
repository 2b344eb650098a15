-- Gives a cancelled order's unit back to the sale, once: the database has already
-- cancelled the order and added the unit to its own stock (one transaction, which
-- also recorded that Redis owes this step).
-- KEYS[1] stock   KEYS[2] buyers   KEYS[3] restocked (orders whose unit Redis took back)
-- KEYS[4] window (its `expires` is when the sale's keys expire)
-- ARGV[1] order id   ARGV[2] user id   ARGV[3] events channel   ARGV[4] restocked event
-- Returns 1 when it gave the unit back now, 0 when that was done before, or when
-- Redis does not hold the sale.
--
-- A sale without its window is not held (its keys expired a day after its end, or
-- Redis lost them): there is nothing to give back to, and a rebuild reads the
-- database, which counts the unit and the cancelled order. Recording the order would
-- only make a set that never expires (an order may be cancelled days after the sale,
-- as its time to pay allows). The unit is announced all the same: every process
-- clears its sold-out flag, and its next grab reaches Redis and starts the rebuild.
local expires = redis.call('HGET', KEYS[4], 'expires')
if not expires then
  redis.call('PUBLISH', ARGV[3], ARGV[4])
  return 0
end
local acted = redis.call('SADD', KEYS[3], ARGV[1])
if acted == 1 then
  unit_back(KEYS[1], KEYS[2], ARGV[2], ARGV[1], true, true, ARGV[3], ARGV[4])
end
-- A write every time, even when the give-back was done before: the `WAIT` that
-- follows on this connection then covers that earlier give-back as well (a master
-- replicates its writes in one ordered stream), whoever made it.
redis.call('PEXPIREAT', KEYS[3], expires)
return acted
