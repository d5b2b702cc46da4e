-- presence: says a pod is alive and counts the pods alive.
--
-- KEYS[1]: the namespace's pods, a sorted set of holder names scored by
--   the Redis ms until which each is alive.
-- ARGV[1] holder: the pod's name;
-- ARGV[2] life: how long the pod counts as alive, ms.
-- Returns {pods, malformed}. A key of the wrong type is garbage
-- (deleted); a pod alive past life from now (no pod writes that) is
-- dropped, counted.

local malformed, life = 0, num(ARGV[2])
local added = redis.pcall('ZADD', KEYS[1], now + life, ARGV[1])
if type(added) == 'table' and added.err then
  redis.call('DEL', KEYS[1])
  malformed = 1
  redis.call('ZADD', KEYS[1], now + life, ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
malformed = malformed + redis.call('ZREMRANGEBYSCORE', KEYS[1], '(' .. fmt(now + life), '+inf')
local n = redis.call('ZCARD', KEYS[1])
redis.call('PEXPIRE', KEYS[1], life)
return {n, malformed}
