-- leave: gives a pod's share back when its fleet closes: its entry
-- ("d g a e l", or "d g a e") goes, and its hold leaves the totals
-- (quota.lua).
--
-- KEYS[1]: the quota hash.
-- ARGV[1] holder: the pod's name;
-- ARGV[2] limit: RATE_LIMIT, micro-requests per second.
-- Returns {}.

local got = redis.pcall('HMGET', KEYS[1], ARGV[1], '#')
if got.err or not got[1] then return {} end
redis.call('HDEL', KEYS[1], ARGV[1])
local L = num(ARGV[2])
local f2, f3 = string.match(got[1], '^%d+ (%d+) (%d+) %d+ %d+$')
if not f2 then f2, f3 = string.match(got[1], '^%d+ (%d+) (%d+) %d+$') end
local og, oa = int(f2, M), int(f3, M)
if type(got[2]) ~= 'string' or not (og and oa) then return {} end
local at, held, rest = string.match(got[2], '^(%d+) (%d+) (.*)$')
held = int(held, M)
local old = math.max(math.min(og, L), math.min(oa, L))
if held and held >= old then
  redis.call('HSET', KEYS[1], '#', at .. ' ' .. fmt(held - old) .. ' ' .. rest)
end
return {}
