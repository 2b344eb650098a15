-- A shopper's grab token for a sale: what `token.lua` issues from the start and
-- `grab.lua` checks, in one place. A keyed hash of the sale's secret (kept in the
-- window, never sent), the shopper and the sale: nobody can compute it without the
-- secret, and one shopper's token is worth nothing to another.
local function grab_token(secret, user, voucher)
  return string.sub(redis.sha1hex(secret .. ':' .. user .. ':' .. voucher), 1, 32)
end
