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
// above the limit, or an expiry past now + the calling pod's grant life,
// is cut to it, in Redis too (capped); a pause key with no expiry is
// deleted (rejected), one past the calling pod's longest pause is cut to
// it (capped).

// quotaOp records what this pod wants and grants it its share
// (KEYS: quota hash, pause key; ARGV: holder, limit, demand, ack, cap,
// life ms, longest pause ms, lost cap). The share is this pod's max-min
// fair share of the limit over the demands of the live pods (each pod
// gets what it wants up to an equal split of what the others leave; when
// every pod has what it wants, the rest is split evenly), cut to what
// the other pods do not hold and to cap. A pod that was sending (ack
// above 0) but has no entry finds the hash lost (deleted, or Redis
// restarted or failed over between two ticks): the others it does not
// see may still send at their shares, so it takes at most lost cap
// (limit / pods last seen), and says so. It returns {grant, live pods,
// pause ms left, rejected, capped, lost (0 or 1)}.
const quotaOp = counts + `
local holder, L, d, a, cap = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local life, bound = tonumber(ARGV[6]), tonumber(ARGV[7])
local lost = 0
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'hash' and kind ~= 'none' then
  redis.call('DEL', KEYS[1])
  rejected = rejected + 1
end
local all = redis.call('HGETALL', KEYS[1])
local wants, held, mine = {d}, 0, false
for i = 1, #all, 2 do
  local k = all[i]
  if k == holder then
    mine = true
  else
    local f1, f2, f3, f4 = string.match(all[i + 1], '^(%d+) (%d+) (%d+) (%d+)$')
    local pd, pg, pa, pe = int(f1, M), int(f2, M), int(f3, M), int(f4, M)
    if not (pd and pg and pa and pe) then
      redis.call('HDEL', KEYS[1], k)
      rejected = rejected + 1
    elseif pe <= now then
      redis.call('HDEL', KEYS[1], k)
    else
      if pd > L or pg > L or pa > L or pe > now + life then
        pd, pg, pa, pe = math.min(pd, L), math.min(pg, L), math.min(pa, L), math.min(pe, now + life)
        redis.call('HSET', KEYS[1], k, fmt(pd) .. ' ' .. fmt(pg) .. ' ' .. fmt(pa) .. ' ' .. fmt(pe))
        capped = capped + 1
      end
      wants[#wants + 1] = pd
      held = held + math.max(pg, pa)
    end
  end
end
if not mine and a > 0 then
  cap = math.min(cap, tonumber(ARGV[8]))
  lost = 1
end
table.sort(wants)
local n, left, level = #wants, L, nil
for i = 1, n do
  local each = left / (n - i + 1)
  if wants[i] > each then
    level = each
    break
  end
  left = left - wants[i]
end
local target
if level then target = math.min(d, level) else target = d + left / n end
local g = math.max(0, math.floor(math.min(target, L - held, cap)))
redis.call('HSET', KEYS[1], holder, fmt(d) .. ' ' .. fmt(g) .. ' ' .. fmt(a) .. ' ' .. fmt(now + life))
redis.call('PEXPIRE', KEYS[1], 2 * life)
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
return {g, n, pause, rejected, capped, lost}
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

// leaveOp gives this pod's share back (KEYS: quota hash; ARGV: holder),
// when its fleet closes. It returns {}.
const leaveOp = `
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'hash' then redis.call('HDEL', KEYS[1], ARGV[1]) end
return {}
`
