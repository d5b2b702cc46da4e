-- The start of every op of a breaker (sync, trip, probe, lease,
-- restore): it reads the system's state into the breaker's variables of
-- the batch script (lua/batch.lua), whose functions write and publish a
-- change (set) and reply. The fleet puts it before each of those ops.
--
-- KEYS[1]: the state hash, <base>:state (v: version, s: 0 closed or 1
--   open, u: open until, Redis ms; k: probes that succeeded this round).
-- ARGV[1] base: the prefix of the system's keys;
-- ARGV[2] channel: the fleet's channel;
-- ARGV[3] system: the system's name;
-- ARGV[4] open: the calling pod's BREAKER_OPEN_TIMEOUT, ms.
-- Then the op's own (ARGV[5] on).
--
-- The state is read with one HMGET of v, s and u, whatever else the
-- hash holds (fields no pod writes are never read). A state that is not
-- a version in [0, M], s 0 or 1 and u an integer, or a key of another
-- type, is garbage: deleted whole (UNLINK) and read as closed, version
-- 0; a hash with none of v, s and u is no state yet (closed, version 0). An open time past now + open is cut to it,
-- in Redis too. Every op replies {v, s, ms left open (negative:
-- half-open), malformed, capped, then its own values}.
-- A change is published as the message "<system> <v> <s> <ms left>"
-- (message.go reads it).

malformed, capped = 0, 0
base, channel, system, open, skey = ARGV[1], ARGV[2], ARGV[3], num(ARGV[4]), KEYS[1]
v, s, u = 0, 0, 0
local h = redis.pcall('HMGET', KEYS[1], 'v', 's', 'u')
if h.err then
  garbage(KEYS[1])
elseif h[1] or h[2] or h[3] then
  local nv, ns, nu = int(h[1], M), int(h[2], 1), int(h[3], M)
  if nv and ns and nu then v, s, u = nv, ns, nu else garbage(KEYS[1]) end
end
if s == 1 and u > now + open then
  u = now + open
  capped = 1
  redis.call('HSET', KEYS[1], 'u', fmt(u))
end
