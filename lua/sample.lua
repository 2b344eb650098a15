-- One voucher's live numbers in one step, for a sale's figures (the dashboard's
-- sampler and sale_stats: src/live/figures.rs). Read-only, and
-- never fails on a missing stream or group (Redis may have lost the voucher).
-- KEYS[1] stock   KEYS[2] buyers   KEYS[3] orders stream   KEYS[4] dlq
-- KEYS[5] refusals counter   KEYS[6] window   ARGV[1] consumer group
-- ARGV[2] how many undelivered entries the lag counts at most
-- Returns name/value pairs (src/live/figures.rs reads them by name): stock (-1 when
-- Redis lacks the voucher), granted, stream_length, lag (-1 when unknown), pending,
-- dead_letters, refused, paused (0/1), begins and ends (the gate's window, Unix ms;
-- each -1 unknown: Redis lacks the window), sold_out_at (the gate's first sell-out, Unix ms; -1 not yet).
local stock = tonumber(redis.call('GET', KEYS[1]) or '-1')
local lag, pending = -1, 0
local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', KEYS[3])
if ok then
  for _, g in ipairs(groups) do
    local fields = {}
    for i = 1, #g, 2 do fields[g[i]] = g[i + 1] end
    if fields['name'] == ARGV[1] then
      pending = tonumber(fields['pending']) or 0
      -- The entries after the group's last delivered one, by their ids: Redis's own
      -- `lag` (from its entries-read counter) stays wrong after a failover.
      local after = redis.call('XRANGE', KEYS[3], '(' .. fields['last-delivered-id'], '+', 'COUNT', ARGV[2])
      lag = #after
    end
  end
end
local window = redis.call('HMGET', KEYS[6], 'paused', 'begins', 'ends', 'sold_out_at')
return {
  'stock', stock,
  'granted', redis.call('HLEN', KEYS[2]),
  'stream_length', redis.call('XLEN', KEYS[3]),
  'lag', lag,
  'pending', pending,
  'dead_letters', redis.call('XLEN', KEYS[4]),
  'refused', tonumber(redis.call('GET', KEYS[5]) or '0'),
  'paused', tonumber(window[1] or '-1'),
  'begins', tonumber(window[2] or '-1'),
  'ends', tonumber(window[3] or '-1'),
  'sold_out_at', tonumber(window[4] or '-1'),
}
