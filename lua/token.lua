-- Issues a shopper's grab token, from the sale's start instant (the gate's clock) on.
-- KEYS[1] the sale's window   ARGV[1] user id   ARGV[2] voucher id
-- Returns the token (32 hex digits), or the API error code that refuses it:
-- unknown_voucher, not_started, ended.
local window = redis.call('HMGET', KEYS[1], 'begins', 'ends', 'secret')
if not window[1] or not window[2] then return 'unknown_voucher' end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(window[1]) then return 'not_started' end
if now >= tonumber(window[2]) then return 'ended' end
return grab_token(window[3] or '', ARGV[1], ARGV[2])
