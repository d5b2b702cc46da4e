-- quota: records what a pod wants and grants it its share of a
-- system's quota.
--
-- KEYS[1]: the quota hash, <base>:quota: one field per pod (its holder
--   name) "d g a e l": the rate it wanted, the rate granted to it, the
--   rate it said it may still send at (its ack), when the entry expires
--   (Redis ms), and the limit it runs with (its ARGV[2]); rates in
--   micro-requests per second. An entry "d g a e", which does not say its
--   limit, runs with this pod's. The field "#" holds the fleet's totals
--   "at held n f x m" (see below; "at held n f x" reads as m = this pod's
--   limit).
-- KEYS[2]: the pause, <base>:pause, its expiry the pause left.
-- ARGV[1] holder: the pod's name;
-- ARGV[2] limit: RATE_LIMIT, micro-requests per second;
-- ARGV[3] demand: what the pod wants, micro-requests per second;
-- ARGV[4] ack: the rate the pod may still send at;
-- ARGV[5] cap: the most the pod takes;
-- ARGV[6] life: the grant's life, ms;
-- ARGV[7] longest pause: the longest pause the pod takes, ms;
-- ARGV[8] lost cap: what a pod that finds its entry gone takes at most
--   (limit / pods last seen);
-- ARGV[9] period: how old the totals may be (the pod's tick), ms;
-- ARGV[10] longest life: the longest grant life of any pod, ms;
-- ARGV[11] most fields: the most fields the hash may hold.
-- Returns {grant, live pods, pause ms left, malformed, capped, lost (0 or 1)}.
--
-- The share is the pod's max-min fair share of the fleet's limit over
-- the demands of the live pods (each pod gets what it wants up to an
-- equal split of what the others leave; when every pod has what it
-- wants, the rest is split evenly, lifting a pod up to an even split of
-- the limit at most, and no pod beyond its demand above one), cut to
-- what the other pods do not hold and to cap. A pod holds max(g, a). A
-- pod that was sending (ack above 0) but has no entry finds the hash
-- lost: it takes at most lost cap, and says so.
--
-- The fleet's limit is the least limit of the live pods (m): pods that
-- disagree on it for a moment (a change of settings reaching them one by
-- one, or settings that differ) grant against the stricter, and each op
-- against min(its own limit, m), so that no pod is granted above its own.
--
-- Its cost does not grow with the pods: the totals "at held n f x m" say
-- when they were counted (at), what the pods hold (held), the live pods
-- (n), the fair level (f 1: each pod gets at most x) or what every pod's
-- demand leaves (f 0: each gets its demand and x / n), and the fleet's
-- limit (m). A pod's op reads its own entry and the totals, moves held by
-- the change of its own hold, and lowers m to its own limit. Once the
-- totals are period old, or do not read as such, or disagree with the
-- pod's own entry, or hold more than the fleet's limit, the op reads
-- every entry (full) and counts them again: about once a tick of the
-- fleet. The totals alone never grant a pod more than an even split of
-- the limit (limit / pods, the pods counted as the larger of n and the
-- entries, HLEN).
--
-- Input: an entry that is not four or five integers (a limit of at least
-- 1) is deleted (malformed); one past its expiry is deleted; a rate above
-- both this pod's limit and the entry's own, or an expiry past now +
-- longest life, is cut (capped). A hash of more than most fields, or a
-- key of another type, is none the fleet wrote: deleted whole (UNLINK,
-- malformed) and read as lost, so that no op reads or deletes garbage
-- field by field. A pause with no expiry is deleted (malformed), one past
-- the longest pause cut to it (capped). The hash's expiry is set at each
-- full count: twice the longest life.

local malformed, capped = 0, 0
local holder, L, d, a, cap = ARGV[1], num(ARGV[2]), num(ARGV[3]), num(ARGV[4]), num(ARGV[5])
local life, bound, period, most = num(ARGV[6]), num(ARGV[7]), num(ARGV[9]), num(ARGV[10])
local lost = 0
-- entry reads "d g a e l" or "d g a e": its l is nil in the second. A
-- count reads every entry with it, so it checks the numbers itself
-- rather than through whole (a call per number).
local function entry(v)
  if type(v) ~= 'string' then return nil end
  local f1, f2, f3, f4, f5 = string.match(v, '^(%d+) (%d+) (%d+) (%d+) (%d+)$')
  if not f1 then
    f1, f2, f3, f4 = string.match(v, '^(%d+) (%d+) (%d+) (%d+)$')
    if not f1 then return nil end
  end
  local pd, pg, pa, pe = tonumber(f1), tonumber(f2), tonumber(f3), tonumber(f4)
  if pd > M or pg > M or pa > M or pe > M then return nil end
  if not f5 then return pd, pg, pa, pe, nil end
  local pl = tonumber(f5)
  if pl > M or pl < 1 then return nil end
  return pd, pg, pa, pe, pl
end
local size = redis.pcall('HLEN', KEYS[1])
if type(size) ~= 'number' or size > num(ARGV[11]) then
  redis.call('UNLINK', KEYS[1])
  malformed = malformed + 1
  size = 0
end
local got = {false, false}
if size > 0 then got = redis.call('HMGET', KEYS[1], holder, '#') end
local mine, old = got[1], 0
local od, og, oa = entry(mine)
if od then old = math.max(math.min(og, L), math.min(oa, L)) end
if not mine and a > 0 then
  cap = math.min(cap, num(ARGV[8]))
  lost = 1
end
local at, held, n, f, x, m, claimed
if type(got[2]) == 'string' then
  local g1, g2, g3, g4, g5, g6 = string.match(got[2], '^(%d+) (%d+) (%d+) ([01]) (%d+) (%d+)$')
  if not g1 then
    g1, g2, g3, g4, g5 = string.match(got[2], '^(%d+) (%d+) (%d+) ([01]) (%d+)$')
    g6 = ARGV[2]
  end
  at, held, n, f, x, m = whole(g1, M), whole(g2, M), whole(g3, 1048576), whole(g4, 1), whole(g5, M), int(g6, M)
  if not (at and held and n and f and x and m and n >= 1 and m >= 1) then
    at = nil
    malformed = malformed + 1
  elseif held < old then
    at = nil
    malformed = malformed + 1
  else
    claimed = held
  end
end
local E, others, target, pods
local fast = at and (od or not mine) and at <= now and now - at < period
if fast then
  E = math.min(L, m)
  fast = held <= E
end
if fast then
  m, others, pods = E, held - old, n
  if not mine then pods = n + 1 end
  local entries = size - 1
  if not mine then entries = entries + 1 end
  pods = math.max(pods, entries)
  if f == 1 then target = math.min(d, x) else target = d + x / n end
  local even = E / pods
  if math.min(target, E - others, cap) > even then
    if d > even then fast = false else target = even end
  end
end
if not fast then
local all = {}
if size > 0 then all = redis.call('HGETALL', KEYS[1]) end
-- The loop reads every entry: it keeps its own counts of the tables
-- (n, #dead) and compares in place of math.min and math.max.
local wants, dead, wanted, dn = {d}, {}, d, 0
others, m, n = 0, L, 1
for i = 1, #all, 2 do
  local k = all[i]
  if k ~= holder and k ~= '#' then
    local pd, pg, pa, pe, pl = entry(all[i + 1])
    if not pd then
      dn = dn + 1
      dead[dn] = k
      malformed = malformed + 1
    elseif pe <= now then
      dn = dn + 1
      dead[dn] = k
    else
      local top = pl or L -- what its own pod may be granted
      if top < L then top = L end
      if pd > top or pg > top or pa > top or pe > now + most then
        pd, pg, pa, pe = math.min(pd, top), math.min(pg, top), math.min(pa, top), math.min(pe, now + most)
        local v = fmt(pd) .. ' ' .. fmt(pg) .. ' ' .. fmt(pa) .. ' ' .. fmt(pe)
        if pl then v = v .. ' ' .. fmt(pl) end
        redis.call('HSET', KEYS[1], k, v)
        capped = capped + 1
      end
      n = n + 1
      wants[n] = pd
      wanted = wanted + pd
      if pg > pa then others = others + pg else others = others + pa end
      if pl and pl < m then m = pl end
    end
  end
end
hdel(KEYS[1], dead)
if claimed and claimed < others + old then malformed = malformed + 1 end
E = m
local left, level = E, nil
if wanted <= E then
  -- every pod has what it wants: no level to find, and no sort
  left = E - wanted
else
  table.sort(wants)
  for i = 1, n do
    local each = left / (n - i + 1)
    if wants[i] > each then
      level = each
      break
    end
    left = left - wants[i]
  end
end
if level then
  target, f, x = math.min(d, level), 1, math.floor(level)
else
  target, f, x = d + left / n, 0, left
  -- the rest lifts a pod up to an even split at most, and no pod above
  -- its own demand beyond one (a pod above one counts every entry on
  -- each of its ticks)
  target = math.min(target, math.max(d, E / n))
end
at, pods = now, n
redis.call('PEXPIRE', KEYS[1], 2 * most)
end
local g = math.max(0, math.floor(math.min(target, E - others, cap)))
held = math.min(M, others + math.max(g, a))
redis.call('HSET', KEYS[1], holder, ARGV[3] .. ' ' .. fmt(g) .. ' ' .. ARGV[4] .. ' ' .. fmt(now + life) .. ' ' .. ARGV[2],
  '#', fmt(at) .. ' ' .. fmt(held) .. ' ' .. fmt(n) .. ' ' .. f .. ' ' .. fmt(x) .. ' ' .. fmt(m))
local pause = redis.call('PTTL', KEYS[2])
if pause == -1 then
  redis.call('DEL', KEYS[2])
  malformed = malformed + 1
  pause = 0
elseif pause > bound then
  redis.call('PEXPIRE', KEYS[2], bound)
  capped = capped + 1
  pause = bound
elseif pause < 0 then
  pause = 0
end
return {g, pods, pause, malformed, capped, lost}
