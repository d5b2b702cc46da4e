-- The start of every op of a breaker (sync, trip, probe, lease,
-- restore): it reads the system's state and defines how a change is
-- written and published. The fleet puts it before each of those ops.
--
-- KEYS[1]: the state hash, <base>:state (v: version, s: 0 closed or 1
--   open, u: open until, Redis ms; k: probes that succeeded this round).
-- ARGV[1] base: the prefix of the system's keys;
-- ARGV[2] channel: the fleet's channel;
-- ARGV[3] system: the system's name;
-- ARGV[4] open: the calling pod's BREAKER_OPEN_TIMEOUT, ms.
-- Then the op's own (ARGV[5] on).
--
-- A state that is not a version in [0, M], s 0 or 1 and u an integer, or
-- a key that is not a small hash (at most 64 fields: HLEN, then HMGET of
-- v, s and u), is garbage: deleted whole (UNLINK) and read as closed,
-- version 0. An open time past now + open is cut to it,
-- in Redis too. Every op replies {v, s, ms left open (negative:
-- half-open), malformed, capped, then its own values}.
-- A change is published as the message "<system> <v> <s> <ms left>"
-- (message.go reads it).

local malformed, capped = 0, 0
local base, channel, system, open = ARGV[1], ARGV[2], ARGV[3], num(ARGV[4])
local function garbage(key)
  redis.call('UNLINK', key)
  malformed = malformed + 1
end
local v, s, u = 0, 0, 0
local size = redis.pcall('HLEN', KEYS[1])
if type(size) ~= 'number' or size > 64 then
  garbage(KEYS[1])
elseif size > 0 then
  local h = redis.call('HMGET', KEYS[1], 'v', 's', 'u')
  local nv, ns, nu = int(h[1], M), int(h[2], 1), int(h[3], M)
  if nv and ns and nu then v, s, u = nv, ns, nu else garbage(KEYS[1]) end
end
if s == 1 and u > now + open then
  u = now + open
  capped = 1
  redis.call('HSET', KEYS[1], 'u', fmt(u))
end
local function left()
  if s == 1 then return u - now end
  return 0
end
local function after()
  if v >= M then return 1 end
  return v + 1
end
local function set(nv, ns, nu)
  local ms = 0
  if ns == 1 then ms = nu - now end
  redis.call('PUBLISH', channel, system .. ' ' .. fmt(nv) .. ' ' .. ns .. ' ' .. fmt(ms))
  v, s, u = nv, ns, nu
  redis.call('HSET', KEYS[1], 'v', fmt(v), 's', s, 'u', fmt(u))
  redis.call('HDEL', KEYS[1], 'k')
end
local function reply(...)
  return {v, s, left(), malformed, capped, ...}
end
