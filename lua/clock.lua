-- The gate's clock: the time (Unix ms) on the node that holds the sale, the clock
-- `grab.lua` decides by. KEYS[1] the sale's window (read for nothing: it routes the
-- call to the sale's node on a Redis Cluster).
local t = redis.call('TIME')
return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
