package fleet

import "github.com/redis/go-redis/v9"

// The fleet's state of one system lives in one Redis hash, <base>:state,
// with the fields v (version: every change adds one), s (0 closed, 1 open)
// and u (open until, in Redis's clock, ms); k counts the probes that
// succeeded in the current half-open round. Half-open is not stored: it is
// "open and u has passed". Every change is made by one of these scripts,
// each a compare-and-set on v (Redis runs a script alone), and is
// published on the namespace's channel as "<system> <v> <s> <ms left>".
// Every script returns {v, s, ms left open (negative: half-open), ...}.
//
// The window of the closed state of version v is the hash <base>:win:<v>,
// one field per bucket of Redis time (r<bucket>: requests, f<bucket>:
// failures), so that a new closed state starts with an empty window.
// Probe leases of the open state of version v are <base>:probe:<v>:<i>,
// i in 1..HALF_OPEN_PROBES, taken with SET NX PX.

// head reads the clock and the state, and defines how a change is
// written and published.
const head = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local st = redis.call('HMGET', KEYS[1], 'v', 's', 'u')
local v, s, u = tonumber(st[1]) or 0, tonumber(st[2]) or 0, tonumber(st[3]) or 0
local function left()
  if s == 1 then return u - now end
  return 0
end
local function set(nv, ns, nu, channel, system)
  v, s, u = nv, ns, nu
  redis.call('HSET', KEYS[1], 'v', v, 's', s, 'u', u)
  redis.call('HDEL', KEYS[1], 'k')
  redis.call('PUBLISH', channel, system .. ' ' .. v .. ' ' .. s .. ' ' .. left())
end
`

// syncScript adds a pod's counts to the window of the closed state
// (ARGV: base, requests, failures, bucket ms, buckets, min requests,
// failure ratio, open ms, channel, system), drops buckets older than the
// window, and trips the state open when the fleet's totals break the
// rule. It returns {v, s, ms left, requests, failures} of the window.
// With zero counts it is the periodic read of the state.
var syncScript = redis.NewScript(head + `
local R, F = 0, 0
if s == 0 then
  local win = ARGV[1] .. ':win:' .. v
  local req, fail = tonumber(ARGV[2]), tonumber(ARGV[3])
  local bms, n = tonumber(ARGV[4]), tonumber(ARGV[5])
  local b = math.floor(now / bms)
  if req > 0 then
    redis.call('HINCRBY', win, 'r' .. b, req)
    if fail > 0 then redis.call('HINCRBY', win, 'f' .. b, fail) end
    redis.call('PEXPIRE', win, bms * (n + 1))
  end
  local all = redis.call('HGETALL', win)
  for i = 1, #all, 2 do
    local k = all[i]
    if tonumber(string.sub(k, 2)) <= b - n then
      redis.call('HDEL', win, k)
    elseif string.sub(k, 1, 1) == 'r' then
      R = R + tonumber(all[i + 1])
    else
      F = F + tonumber(all[i + 1])
    end
  end
  if R > 0 and R >= tonumber(ARGV[6]) and F >= tonumber(ARGV[7]) * R then
    redis.call('DEL', win)
    set(v + 1, 1, now + tonumber(ARGV[8]), ARGV[9], ARGV[10])
  end
end
return {v, s, left(), R, F}
`)

// tripScript opens the closed state of version ARGV[1] (ARGV: version,
// open ms, channel, system): a pod's own breaker tripped. A stale version
// changes nothing.
var tripScript = redis.NewScript(head + `
if v == tonumber(ARGV[1]) and s == 0 then
  set(v + 1, 1, now + tonumber(ARGV[2]), ARGV[3], ARGV[4])
end
return {v, s, left()}
`)

// probeScript records the result of a half-open probe of the open state
// of version ARGV[1] (ARGV: version, 1 success or 0 failure, probes, open
// ms, channel, system): a failure opens again, the last of HALF_OPEN_PROBES
// successes closes. A stale version, or a state still open, changes
// nothing: a writer that missed a change can never undo it.
var probeScript = redis.NewScript(head + `
if v == tonumber(ARGV[1]) and s == 1 and now >= u then
  if ARGV[2] == '1' then
    if redis.call('HINCRBY', KEYS[1], 'k', 1) >= tonumber(ARGV[3]) then
      set(v + 1, 0, 0, ARGV[5], ARGV[6])
    end
  else
    set(v + 1, 1, now + tonumber(ARGV[4]), ARGV[5], ARGV[6])
  end
end
return {v, s, left()}
`)

// leaseScript takes one probe lease of the half-open state of version
// ARGV[2] (ARGV: base, version, probes, lease ms, holder). It returns
// {v, s, ms left, lease number or 0}.
var leaseScript = redis.NewScript(head + `
if v == tonumber(ARGV[2]) and s == 1 and now >= u then
  for i = 1, tonumber(ARGV[3]) do
    if redis.call('SET', ARGV[1] .. ':probe:' .. v .. ':' .. i, ARGV[5], 'NX', 'PX', tonumber(ARGV[4])) then
      return {v, s, left(), i}
    end
  end
end
return {v, s, left(), 0}
`)

// restoreScript writes back a state Redis lost (ARGV: version, s, ms left,
// channel, system): it applies only when Redis holds an older version,
// as after a restart that came back empty.
var restoreScript = redis.NewScript(head + `
if v < tonumber(ARGV[1]) then
  local ns = tonumber(ARGV[2])
  local nu = 0
  if ns == 1 then nu = now + tonumber(ARGV[3]) end
  set(tonumber(ARGV[1]), ns, nu, ARGV[4], ARGV[5])
end
return {v, s, left()}
`)

var scripts = []*redis.Script{syncScript, tripScript, probeScript, leaseScript, restoreScript}
