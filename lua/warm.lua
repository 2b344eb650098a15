-- Warm-up: loads one voucher (one bucket of its sale: every key below is the
-- bucket's) into Redis unless Redis already holds it, refreshes its
-- window from the database's row unless Redis holds a newer one, and makes every key
-- of its sale expire after the drain grace. Every operator change runs it, so the
-- gate follows the change the moment this returns.
-- KEYS[1] stock   KEYS[2] buyers (shopper -> order id)   KEYS[3] window   KEYS[4] orders stream
-- KEYS[5] results   KEYS[6] dlq   KEYS[7] refusals counter   KEYS[8] restocked orders
-- KEYS[9] stock changes made   KEYS[10] the rebuild's ticket
-- ARGV[1] begins (ms)   ARGV[2] ends (ms)   ARGV[3] when the sale's keys expire (ms)
-- ARGV[4] paused (0/1)   ARGV[5] price   ARGV[6] the row's version
-- ARGV[7] fair start (0/1)   ARGV[8] the sale's start secret (grab tokens)
-- ARGV[9] the workers' consumer group   ARGV[10] the sale's shards (buckets)
-- ARGV[11] the Redis layout the caller speaks (`backend::layout_version`): a sale
-- warmed in a newer one is left alone, and the call fails with `LAYOUT <its layout>`;
-- one warmed in an older one is not held (its keys' forms are not this layout's): the
-- snapshot replaces it, in this layout
-- ARGV[12] the sale's end (ARGV[2]) when the sale is over by the clock its operators'
-- changes are decided by (a sale of several shards: `sale::warm`'s `ended`), '' when
-- not: stored as the window's `ended`, and while it names the window's end the gate
-- refuses whatever its own node's clock says (a flag judged against an end since
-- moved names nothing)
-- ARGV[13] the rebuild's ticket: the snapshot loads only while KEYS[10] holds it (the
-- rebuild set it, to lapse at its deadline: a load that reaches Redis after its
-- rebuild gave up and let the database's lock go must load nothing, `sale::warm`),
-- ARGV[14] stock left, ARGV[15] how many buyers, ARGV[16] how many cancelled orders,
-- ARGV[17] how many orders, then pairs of buyer id and their order's id, the ids of
-- cancelled orders (their
-- units are in the stock left), pairs of order id and result for every order stored
-- (the results are replaced: a result then means the order is in these books, see
-- `settle.lua`), and pairs of stock change id and the units it made (every change of
-- the voucher, so none is made again): the database's snapshot.
-- Without it the script only looks: it loads nothing when Redis lost the voucher.
-- Returns 1 when Redis held the voucher whole, 0 when it did not (and loaded the
-- snapshot if given), 2 when it did not and the snapshot came too late (its ticket
-- gone: nothing loaded).
--
-- Whole: its stock, its window, and its order stream with the workers' group. Any of
-- them missing means Redis lost the voucher, whole or in part (a key evicted or
-- deleted, a stream gone with the orders queued in it): the snapshot replaces what
-- is left, stock included. That is safe because results are replaced too: an order
-- Redis granted and the database has not committed has no result afterwards, and
-- when it commits, settling it takes its unit from the rebuilt stock. Grants lost
-- with a stream are lost: their units are back on sale, their shoppers may grab again.
-- Keys made later get the same expiry: refusals from the gate, dead letters from the
-- give-back (both read it from the window's `expires`), results and buyers from the
-- worker's batches.
local function has_group()
  local groups = redis.pcall('XINFO', 'GROUPS', KEYS[4])
  if type(groups) ~= 'table' or groups.err then return false end
  for _, group in ipairs(groups) do
    for i = 1, #group, 2 do
      if group[i] == 'name' and group[i + 1] == ARGV[9] then return true end
    end
  end
  return false
end
local layout = redis.call('HGET', KEYS[3], 'layout')
if layout and tonumber(layout) > tonumber(ARGV[11]) then return redis.error_reply('LAYOUT ' .. layout) end
local held = 0
-- A window without `layout` was written in layout 1.
local current = tonumber(layout or '1') == tonumber(ARGV[11])
if current and redis.call('EXISTS', KEYS[1]) == 1 and redis.call('EXISTS', KEYS[3]) == 1 and has_group() then
  held = 1
end
if held == 0 then
  if #ARGV < 17 then
    return 0
  end
  if redis.call('GET', KEYS[10]) ~= ARGV[13] then
    return 2
  end
  redis.call('DEL', KEYS[2], KEYS[5], KEYS[8], KEYS[9], KEYS[10])
  local chunk = 1000
  local first, last = 18, 17 + 2 * tonumber(ARGV[15])
  for i = first, last, chunk do
    redis.call('HSET', KEYS[2], unpack(ARGV, i, math.min(i + chunk - 1, last)))
  end
  first, last = last + 1, last + tonumber(ARGV[16])
  for i = first, last, chunk do
    redis.call('SADD', KEYS[8], unpack(ARGV, i, math.min(i + chunk - 1, last)))
  end
  first, last = last + 1, last + 2 * tonumber(ARGV[17])
  for i = first, last, chunk do
    redis.call('HSET', KEYS[5], unpack(ARGV, i, math.min(i + chunk - 1, last)))
  end
  for i = last + 1, #ARGV, chunk do
    redis.call('HSET', KEYS[9], unpack(ARGV, i, math.min(i + chunk - 1, #ARGV)))
  end
  redis.call('SET', KEYS[1], ARGV[14])
  -- The group reads its stream from the start: grants made since the stream was made
  -- again (the gate's XADD makes it) are not skipped.
  if not has_group() then
    redis.call('XGROUP', 'CREATE', KEYS[4], ARGV[9], '0', 'MKSTREAM')
  end
  local expires = redis.call('HGET', KEYS[3], 'expires') or ARGV[3]
  for _, key in ipairs({KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[8], KEYS[9]}) do
    redis.call('PEXPIREAT', key, expires)
  end
  -- Which rebuild loaded it, written last (a script that fails midway keeps what it
  -- wrote): one whose answer was lost (its call, sent again, found the voucher held)
  -- reads it back, so what its database half wrote stands.
  redis.call('HSET', KEYS[3], 'rebuilt_by', ARGV[13])
end
local stored = tonumber(redis.call('HGET', KEYS[3], 'version') or '0')
if tonumber(ARGV[6]) < stored then return held end
redis.call('HSET', KEYS[3], 'begins', ARGV[1], 'ends', ARGV[2], 'expires', ARGV[3],
  'paused', ARGV[4], 'price', ARGV[5], 'version', ARGV[6], 'fair', ARGV[7], 'secret', ARGV[8],
  'shards', ARGV[10], 'layout', ARGV[11])
if ARGV[12] ~= '' then
  redis.call('HSET', KEYS[3], 'ended', ARGV[12])
end
for i = 1, 9 do
  redis.call('PEXPIREAT', KEYS[i], ARGV[3])
end
return held
