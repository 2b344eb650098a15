-- A worker's name, held by one process at a time (`src/worker/name.rs`).
-- KEYS[1] the name's lease   ARGV[1] this holder's token   ARGV[2] how long it lasts
-- (ms); 0: let it go.
-- Returns 1 while this holder has the name (taken, renewed, or taken again after
-- Redis lost the lease), 0 when another holder has it.
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
if ARGV[2] == '0' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
