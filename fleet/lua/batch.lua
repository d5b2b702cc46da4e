-- The batch script: it runs, in order, the ops named in ARGV, each a
-- function of its own KEYS and ARGV (the files of this folder, which the
-- fleet joins into this script where "-- ops" stands).
--
-- KEYS: every key of the ops (on Redis Cluster, those of the first op
--   alone: they route the call to the master of that slot).
-- ARGV, for each op in turn:
--   name: the op's name (its file's, without .lua);
--   nk: how many keys it has;
--   na: how many arguments it has;
--   then its nk keys, then its na arguments.
-- Returns one reply per op, in order.
--
-- Redis's clock is read once per batch (now, ms). Every op reads a number
-- it did not write with int (an integer in [0, hi], or nil), and writes
-- one with fmt: Lua's own tostring writes 1e+15 from 10^15.

local M = 9007199254740991
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- A string is parsed once a call (num: tonumber's result; bucket: a
-- window's field, lua/sync.lua): the ops of a call read the same
-- arguments, counts and buckets, system after system, and a parse costs
-- more than a lookup.
local nums, buckets = {}, {}
local function num(x)
  local n = nums[x]
  if n == nil then
    n = tonumber(x) or false
    nums[x] = n
  end
  return n
end
local function int(x, hi)
  local n = x
  if type(x) == 'string' then
    n = num(x)
  elseif type(x) ~= 'number' then
    return nil
  end
  if n and n >= 0 and n <= hi and n % 1 == 0 then return n end
  return nil
end
-- whole is int(x, hi) of a pattern's capture of digits (or nil): what
-- int checks, such a string passes but for its bound; it is parsed anew
-- (an entry's numbers seldom repeat).
local function whole(x, hi)
  if not x then return nil end
  local n = tonumber(x)
  if n <= hi then return n end
  return nil
end
-- count is int(x, M) of a string, once a call: a window's counts.
local counts = {}
local function count(x)
  local n = counts[x]
  if n == nil then
    n = int(x, M) or false
    counts[x] = n
  end
  return n
end
-- bucket reads a window's field name r<bucket> or f<bucket>: the bucket,
-- negative for f; false for any other name.
local function bucket(k)
  local at = buckets[k]
  if at == nil then
    local side, digits = string.match(k, '^([rf])([1-9]%d*)$')
    at = tonumber(digits) or false
    if at and side == 'f' then at = -at end
    buckets[k] = at
  end
  return at
end
-- fmt writes n (an integer) once a call too: the ops of a call write the
-- same times, buckets and counts of pods.
local fmts = {}
local function fmt(n)
  local x = fmts[n]
  if not x then
    x = string.format('%d', n)
    if n == n then fmts[n] = x end -- NaN is no key
  end
  return x
end

-- small reads a hash the fleet keeps small (a state, a window) in two
-- bounded commands: nil when it is not a hash, or holds more than 64
-- fields (none the fleet wrote). HLEN guards HGETALL: cheaper than one
-- HSCAN, and an empty key costs HLEN alone.
local function small(key)
  local n = redis.pcall('HLEN', key)
  if type(n) ~= 'number' or n > 64 then return nil end
  if n == 0 then return {} end
  return redis.call('HGETALL', key)
end

-- hdel deletes fields of key, a thousand to a command.
local function hdel(key, fields)
  for i = 1, #fields, 1000 do
    redis.call('HDEL', key, unpack(fields, i, math.min(i + 999, #fields)))
  end
end

-- The breaker op running now (lua/breaker.lua sets them first): its
-- counts of malformed and capped values, its base, channel, system, open
-- timeout and state key, and the state (v, s, u); the functions after
-- them are what its op changes and replies with. The ops of a call run
-- one after another: one set serves them all, made once a call.
local malformed, capped, base, channel, system, open, skey = 0, 0
local v, s, u = 0, 0, 0
local function garbage(key)
  redis.call('UNLINK', key)
  malformed = malformed + 1
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
  redis.call('HSET', skey, 'v', fmt(v), 's', s, 'u', fmt(u))
  redis.call('HDEL', skey, 'k')
end
local function reply(...)
  return {v, s, left(), malformed, capped, ...}
end

local ops = {}
-- ops

local out, a = {}, 1
while a <= #ARGV do
  local name, nk, na = ARGV[a], num(ARGV[a + 1]), num(ARGV[a + 2])
  local k = a + 3 + nk
  local keys, argv = {unpack(ARGV, a + 3, k - 1)}, {unpack(ARGV, k, k + na - 1)}
  a = k + na
  out[#out + 1] = ops[name](keys, argv)
end
return out
