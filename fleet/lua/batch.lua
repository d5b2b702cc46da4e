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
local function int(x, hi)
  if type(x) ~= 'string' and type(x) ~= 'number' then return nil end
  local n = tonumber(x)
  if n and n >= 0 and n <= hi and n == math.floor(n) then return n end
  return nil
end
local function fmt(n) return string.format('%d', n) end

-- small reads a hash the fleet keeps small (a state, a window) in one
-- bounded command: nil when it is not a hash, or holds more fields than
-- one HSCAN of 64 returns (none the fleet wrote).
local function small(key)
  local r = redis.pcall('HSCAN', key, '0', 'COUNT', 64)
  if r.err or r[1] ~= '0' then return nil end
  return r[2]
end

-- hdel deletes fields of key, a thousand to a command.
local function hdel(key, fields)
  for i = 1, #fields, 1000 do
    redis.call('HDEL', key, unpack(fields, i, math.min(i + 999, #fields)))
  end
end

local ops = {}
-- ops

local out, a = {}, 1
while a <= #ARGV do
  local name, nk, na = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local keys, argv = {}, {}
  for j = 1, nk do keys[j] = ARGV[a + 2 + j] end
  for j = 1, na do argv[j] = ARGV[a + 2 + nk + j] end
  a = a + 3 + nk + na
  out[#out + 1] = ops[name](keys, argv)
end
return out
