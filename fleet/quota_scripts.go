package fleet

// The fleet's quota of one system lives in the hash <base>:quota, one
// field per pod (its holder name), whose value is "d g a e": the rate
// the pod wanted (d), the rate granted to it (g), the rate it said it
// may still send at when it asked (a, its ack), and when the entry
// expires (e, Redis ms). Rates are integers in micro-requests per second
// (the largest RATE_LIMIT, 10^9/s, is 10^15: exact in a Lua number). A
// pod holds max(g, a) of the limit: what it was granted, or what it may
// still send at until it has applied a smaller grant. A pause the
// upstream asked for is the key <base>:pause, whose time to live is the
// pause left.
//
// What the scripts read there is input, as for the breaker: an entry
// that is not four integers is deleted (rejected); an entry past its
// expiry is deleted (a dead pod's share comes back by itself); a rate
// above the limit, or an expiry past now + the longest grant life of any
// pod, is cut to it, in Redis too (capped); a pause key with no expiry is
// deleted (rejected), one past the calling pod's longest pause is cut to
// it (capped).

// quotaOp records what this pod wants and grants it its share (KEYS:
// quota hash, pause key; ARGV: holder, limit, demand, ack, cap, life ms,
// longest pause ms, lost cap, period ms, longest life ms, most fields). The share is this pod's
// max-min fair share of the limit over the demands of the live pods
// (each pod gets what it wants up to an equal split of what the others
// leave; when every pod has what it wants, the rest is split evenly),
// cut to what the other pods do not hold and to cap. A pod that was
// sending (ack above 0) but has no entry finds the hash lost (deleted,
// or Redis restarted or failed over between two ticks): the others it
// does not see may still send at their shares, so it takes at most lost
// cap (limit / pods last seen), and says so. It returns {grant, live
// pods, pause ms left, rejected, capped, lost (0 or 1)}. A hash of more
// than most fields (HLEN; far more than the pods the caller knows of) is
// none the fleet wrote: it is deleted whole (UNLINK), counted as
// rejected, and read as lost, so that no op reads or deletes garbage
// field by field.
//
// Its cost does not grow with the pods: the field "#" of the hash holds
// the fleet's totals, "at held n f x": when they were counted (at, Redis
// ms), what the pods hold (held, the sum of max(g, a) over the entries),
// the live pods (n), and the fair level (f 1: each pod gets at most x) or
// what every pod's demand leaves (f 0: each gets its demand and x / n).
// A pod's op reads its own entry and the totals, and moves held by the
// change of its own hold: the holds sum exactly as before, and an entry
// that expires still counts until the next count (the safe side). Once
// the totals are period old (the caller's tick), or do not read as such,
// or disagree with the pod's own entry, the op reads every entry (full)
// and counts them again: the whole hash is read about once a tick of the
// fleet, whatever the number of pods. The fair level lags by that much;
// the limit never does.
//
// The totals are input too: another client may rewrite them so that they
// read fresh and say that nobody else holds anything. So the totals alone
// never grant a pod more than an even split of the limit (limit / pods,
// the pods counted as the larger of n and the entries the hash holds,
// HLEN): a pod that wants more is granted it only by a full count, and a
// pod that wants less gets at most the even split. Totals that are not
// five numbers, that hold less than the pod's own entry, or that a full
// count finds holding less than the entries do (the totals never hold
// less, even with entries past their expiry), are counted as rejected.
const quotaOp = counts + `
local holder, L, d, a, cap = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local life, bound, period, most = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[9]), tonumber(ARGV[10])
local lost = 0
local function entry(v)
  if type(v) ~= 'string' then return nil end
  local f1, f2, f3, f4 = string.match(v, '^(%d+) (%d+) (%d+) (%d+)$')
  local pd, pg, pa, pe = int(f1, M), int(f2, M), int(f3, M), int(f4, M)
  if pd and pg and pa and pe then return pd, pg, pa, pe end
  return nil
end
local size = redis.pcall('HLEN', KEYS[1])
if type(size) ~= 'number' or size > tonumber(ARGV[11]) then
  redis.call('UNLINK', KEYS[1])
  rejected = rejected + 1
  size = 0
end
local got = {false, false}
if size > 0 then got = redis.call('HMGET', KEYS[1], holder, '#') end
local mine, old = got[1], 0
local od, og, oa = entry(mine)
if od then old = math.max(math.min(og, L), math.min(oa, L)) end
if not mine and a > 0 then
  cap = math.min(cap, tonumber(ARGV[8]))
  lost = 1
end
local at, held, n, f, x, tail, claimed
if type(got[2]) == 'string' then
  local g1, g2, g3, g4, g5
  g1, g2, tail, g3, g4, g5 = string.match(got[2], '^(%d+) (%d+) ((%d+) ([01]) (%d+))$')
  at, held, n, f, x = int(g1, M), int(g2, M), int(g3, 1048576), int(g4, 1), int(g5, M)
  if not (at and held and n and f and x and n >= 1) then
    at = nil
    rejected = rejected + 1
  elseif held < old then
    at = nil
    rejected = rejected + 1
  else
    claimed = held
  end
end
local others, target, pods
local fast = at and (od or not mine) and at <= now and now - at < period and held <= L
if fast then
  others, pods = held - old, n
  if not mine then pods = n + 1 end
  local entries = size - 1
  if not mine then entries = entries + 1 end
  pods = math.max(pods, entries)
  if f == 1 then target = math.min(d, x) else target = d + x / n end
  local even = L / pods
  if math.min(target, L - others, cap) > even then
    if d > even then fast = false else target = even end
  end
end
if not fast then
` + quotaFull + `
end
local g = math.max(0, math.floor(math.min(target, L - others, cap)))
held = others + math.max(g, a)
redis.call('HSET', KEYS[1], holder, ARGV[3] .. ' ' .. fmt(g) .. ' ' .. ARGV[4] .. ' ' .. fmt(now + life),
  '#', fmt(at) .. ' ' .. fmt(held) .. ' ' .. tail)
local pause = redis.call('PTTL', KEYS[2])
if pause == -1 then
  redis.call('DEL', KEYS[2])
  rejected = rejected + 1
  pause = 0
elseif pause > bound then
  redis.call('PEXPIRE', KEYS[2], bound)
  capped = capped + 1
  pause = bound
elseif pause < 0 then
  pause = 0
end
return {g, pods, pause, rejected, capped, lost}
`

// quotaFull is quotaOp's count of every entry: it deletes the entries
// that are garbage or past their expiry, cuts those past the limit or
// the pod's life, and sets others (what the other pods hold), target
// (this pod's fair share), pods, and the totals (at, n, f, x) it then
// writes with held. An entry is cut to the longest life of any pod (a
// pod's life follows its tick, which follows the pods it counts). The
// hash's expiry is set here: it outlives its last writer by two of
// those.
const quotaFull = `
local all = {}
if size > 0 then all = redis.call('HGETALL', KEYS[1]) end
local wants, dead = {d}, {}
others = 0
for i = 1, #all, 2 do
  local k = all[i]
  if k ~= holder and k ~= '#' then
    local pd, pg, pa, pe = entry(all[i + 1])
    if not pd then
      dead[#dead + 1] = k
      rejected = rejected + 1
    elseif pe <= now then
      dead[#dead + 1] = k
    else
      if pd > L or pg > L or pa > L or pe > now + most then
        pd, pg, pa, pe = math.min(pd, L), math.min(pg, L), math.min(pa, L), math.min(pe, now + most)
        redis.call('HSET', KEYS[1], k, fmt(pd) .. ' ' .. fmt(pg) .. ' ' .. fmt(pa) .. ' ' .. fmt(pe))
        capped = capped + 1
      end
      wants[#wants + 1] = pd
      others = others + math.max(pg, pa)
    end
  end
end
hdel(KEYS[1], dead)
if claimed and claimed < others + old then rejected = rejected + 1 end
table.sort(wants)
local left, level = L, nil
n = #wants
for i = 1, n do
  local each = left / (n - i + 1)
  if wants[i] > each then
    level = each
    break
  end
  left = left - wants[i]
end
if level then
  target, f, x = math.min(d, level), 1, math.floor(level)
else
  target, f, x = d + left / n, 0, left
end
at, pods, tail = now, n, fmt(n) .. ' ' .. f .. ' ' .. fmt(x)
redis.call('PEXPIRE', KEYS[1], 2 * most)
`

// pauseOp pauses the system for every pod (KEYS: pause key; ARGV:
// channel, system, ms): it sets the pause key for ms unless a longer
// pause is in force, and then publishes "<system> pause <ms>". A burst
// of 429s, from one pod or many, is one message. It returns {ms of the
// pause in force, rejected}.
const pauseOp = `
local ms = tonumber(ARGV[3])
local rejected = 0
local left = redis.call('PTTL', KEYS[1])
if left == -1 then
  rejected = 1
  left = -2
end
if left < ms then
  redis.call('SET', KEYS[1], '1', 'PX', ms)
  redis.call('PUBLISH', ARGV[1], ARGV[2] .. ' pause ' .. string.format('%d', ms))
  left = ms
end
return {left, rejected}
`

// leaveOp gives this pod's share back (KEYS: quota hash; ARGV: holder,
// limit), when its fleet closes: its entry goes, and its hold leaves the
// totals. It returns {}.
const leaveOp = `
local got = redis.pcall('HMGET', KEYS[1], ARGV[1], '#')
if got.err or not got[1] then return {} end
redis.call('HDEL', KEYS[1], ARGV[1])
local L = tonumber(ARGV[2])
local f1, f2, f3, f4 = string.match(got[1], '^(%d+) (%d+) (%d+) (%d+)$')
local og, oa = int(f2, M), int(f3, M)
if type(got[2]) ~= 'string' or not (og and oa) then return {} end
local at, held, rest = string.match(got[2], '^(%d+) (%d+) (.*)$')
held = int(held, M)
local old = math.max(math.min(og, L), math.min(oa, L))
if held and held >= old then
  redis.call('HSET', KEYS[1], '#', at .. ' ' .. fmt(held - old) .. ' ' .. rest)
end
return {}
`
