package fleet

import (
	"strconv"

	"github.com/outbound-go/outbound/observe"
	"github.com/redis/go-redis/v9"
)

// The fleet's state of one system lives in one Redis hash, <base>:state,
// with the fields v (version: every change adds one), s (0 closed, 1 open)
// and u (open until, in Redis's clock, ms); k counts the probes that
// succeeded in the current half-open round. Half-open is not stored: it is
// "open and u has passed". Every change is made by one of these scripts,
// each a compare-and-set on v (Redis runs a script alone), and is
// published on the namespace's channel as "<system> <v> <s> <ms left>".
//
// The window of the closed state of version v is the hash <base>:win:<v>,
// one field per bucket of Redis time (r<bucket>: requests, f<bucket>:
// failures), so that a new closed state starts with an empty window.
// Probe leases of the open state of version v are <base>:probe:<v>:<i>,
// i in 1..HALF_OPEN_PROBES, taken with SET NX PX.
//
// Other clients can write under the namespace too, so every op reads
// these keys as input (head and the window's loop):
//   - a version is an integer in [0, maxVersion] (Lua numbers are doubles,
//     exact below 2^53); the change after maxVersion is version 1;
//   - s is 0 or 1, u an integer ms; an open time past now + the calling
//     pod's BREAKER_OPEN_TIMEOUT is cut to it, in Redis too;
//   - a state that breaks these rules, or a key of the wrong type (its
//     read fails, in redis.pcall), is garbage: deleted, and read as no state at all (closed, version 0),
//     which the pods then write over;
//   - a window field that is not r<bucket> or f<bucket> with a count, a
//     bucket in the future, or more failures than requests, is deleted;
//   - a lease with no expiry, or one longer than the pod's lease life, is
//     given the pod's lease life.
//
// Numbers are written with string.format('%d'): Lua's own tostring writes
// 1e+15 from 10^15.
//
// Each of these is an op of the batch script (batch.go): a function of
// its own KEYS and ARGV. Every op of a breaker returns {v, s, ms left
// open (negative: half-open), rejected, capped, ...}: the state after it
// ran, the values it found malformed and the open times it cut, then its
// own values. Its ARGV begin with the same four: base, channel, system,
// open ms.

// clock reads Redis's clock (now, in ms), once per batch, and defines
// how every op reads a number it did not write (int: an integer in
// [0, hi], or nil) and writes one (fmt).
const clock = `
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
local function small(key)
  local r = redis.pcall('HSCAN', key, '0', 'COUNT', 64)
  if r.err or r[1] ~= '0' then return nil end
  return r[2]
end
local function hdel(key, fields)
  for i = 1, #fields, 1000 do
    redis.call('HDEL', key, unpack(fields, i, math.min(i + 999, #fields)))
  end
end
`

// counts starts the counts of what an op rejected and capped.
const counts = `
local rejected, capped = 0, 0
`

// head reads the state, and defines how a change is written and
// published.
const head = counts + `
local base, channel, system, open = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local function garbage(key)
  redis.call('UNLINK', key)
  rejected = rejected + 1
end
local v, s, u = 0, 0, 0
local st = small(KEYS[1])
if not st then
  garbage(KEYS[1])
elseif #st > 0 then
  local h = {}
  for i = 1, #st, 2 do h[st[i]] = st[i + 1] end
  local nv, ns, nu = int(h.v, M), int(h.s, 1), int(h.u, M)
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
  return {v, s, left(), rejected, capped, ...}
end
`

// syncOp adds a pod's counts to the window of the closed state (ARGV
// after the four: requests, failures, bucket ms, buckets, min requests,
// failure ratio), drops buckets older than the window, and trips the
// state open when the fleet's totals break the rule. It returns the
// window's requests and failures, and the operator's override (KEYS[2],
// force.go): 0 none, 1 open, 2 closed, and its ms left. With zero counts
// it is the periodic read of the state. The window's expiry is set after
// its counts, so a window nobody writes to expires. An override that is
// not "open" or "closed", or a key of another type, is garbage; one with
// no expiry or past observe.MaxForce is cut to it.
var syncOp = head + `
local R, F = 0, 0
if s == 0 then
  local win = base .. ':win:' .. fmt(v)
  local req, fail = tonumber(ARGV[5]), tonumber(ARGV[6])
  local bms, n = tonumber(ARGV[7]), tonumber(ARGV[8])
  local b = math.floor(now / bms)
  local all = small(win)
  if not all then
    garbage(win)
    all = {}
  end
  local r, f, dead = {}, {}, {}
  for i = 1, #all, 2 do
    local k, x = all[i], int(all[i + 1], M)
    local side, digits = string.match(k, '^([rf])([1-9]%d*)$')
    local at = tonumber(digits)
    if not x or not at or at > b then
      dead[#dead + 1] = k
      rejected = rejected + 1
    elseif at <= b - n then
      dead[#dead + 1] = k
    elseif side == 'r' then
      r[at] = x
    else
      f[at] = x
    end
  end
  for at, x in pairs(f) do
    if x > (r[at] or 0) then
      dead[#dead + 1], dead[#dead + 2] = 'r' .. fmt(at), 'f' .. fmt(at)
      rejected = rejected + 1
      r[at], f[at] = nil, nil
    end
  end
  hdel(win, dead)
  for _, x in pairs(r) do R = R + x end
  for _, x in pairs(f) do F = F + x end
  if req > 0 then
    local at = fmt(b)
    redis.call('HINCRBY', win, 'r' .. at, req)
    if fail > 0 then redis.call('HINCRBY', win, 'f' .. at, fail) end
    redis.call('PEXPIRE', win, bms * (n + 1))
    R, F = R + req, F + fail
  end
  if R > 0 and R >= tonumber(ARGV[9]) and F >= tonumber(ARGV[10]) * R then
    redis.call('DEL', win)
    set(after(), 1, now + open)
  end
end
local fs, fms = 0, 0
local val = redis.pcall('GET', KEYS[2])
if type(val) == 'table' then
  garbage(KEYS[2])
elseif val then
  if val == 'open' then fs = 1 elseif val == 'closed' then fs = 2 else garbage(KEYS[2]) end
  if fs > 0 then
    fms = redis.call('PTTL', KEYS[2])
    if fms < 0 or fms > ` + maxForceMS + ` then
      fms = ` + maxForceMS + `
      redis.call('PEXPIRE', KEYS[2], fms)
      capped = capped + 1
    end
  end
end
return reply(R, F, fs, fms)
`

// maxForceMS is observe.MaxForce in ms, as the scripts write it.
var maxForceMS = strconv.FormatInt(observe.MaxForce.Milliseconds(), 10)

// tripOp opens the closed state of version ARGV[5]: a pod's own
// breaker tripped. A stale version changes nothing.
const tripOp = head + `
local ver = int(ARGV[5], M)
if ver and v == ver and s == 0 then
  set(after(), 1, now + open)
end
return reply()
`

// probeOp records the result of a half-open probe of the open state
// of version ARGV[5] (then: 1 success or 0 failure, probes): a failure
// opens again, the last of HALF_OPEN_PROBES successes closes. A stale
// version, or a state still open, changes nothing: a writer that missed a
// change can never undo it.
const probeOp = head + `
local ver = int(ARGV[5], M)
if ver and v == ver and s == 1 and now >= u then
  if ARGV[6] == '1' then
    local got = redis.call('HGET', KEYS[1], 'k')
    local k = int(got, M)
    if got and not k then rejected = rejected + 1 end
    k = (k or 0) + 1
    if k >= tonumber(ARGV[7]) then
      set(after(), 0, 0)
    else
      redis.call('HSET', KEYS[1], 'k', fmt(k))
    end
  else
    set(after(), 1, now + open)
  end
end
return reply()
`

// leaseOp takes one probe lease of the half-open state of version
// ARGV[5] (then: probes, lease ms, holder). It returns the lease number,
// or 0.
const leaseOp = head + `
local ver, lease = int(ARGV[5], M), tonumber(ARGV[7])
if ver and v == ver and s == 1 and now >= u then
  for i = 1, tonumber(ARGV[6]) do
    local key = base .. ':probe:' .. fmt(v) .. ':' .. i
    local ttl = redis.call('PTTL', key)
    if ttl == -1 or ttl > lease then
      redis.call('PEXPIRE', key, lease)
      rejected = rejected + 1
    end
    if redis.call('SET', key, ARGV[8], 'NX', 'PX', lease) then
      return reply(i)
    end
  end
end
return reply(0)
`

// restoreOp writes back a state Redis lost (ARGV[5..7]: version, s,
// ms left): it applies only when Redis holds an older version, as after a
// restart that came back empty, and only a state the pods accept (a
// version in range, open at most BREAKER_OPEN_TIMEOUT).
const restoreOp = head + `
local ver, ns, ms = int(ARGV[5], M), int(ARGV[6], 1), int(ARGV[7], open)
if not (ver and ns and ms) then
  rejected = rejected + 1
elseif v < ver then
  local nu = 0
  if ns == 1 then nu = now + ms end
  set(ver, ns, nu)
end
return reply()
`

// forceScript writes an operator's override (KEYS[1]; ARGV: channel,
// system, state, ms): "open" or "closed" for ms, or, state "", none; and
// publishes "<system> force <state or -> <ms>".
var forceScript = redis.NewScript(`
if ARGV[3] == '' then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[1], ARGV[2] .. ' force - 0')
else
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
  redis.call('PUBLISH', ARGV[1], ARGV[2] .. ' force ' .. ARGV[3] .. ' ' .. ARGV[4])
end
return 1
`)

// checkScript proves that this pod may do all the fleet needs: run a
// script, write a key (KEYS[1], for ARGV[3] ms) and publish (ARGV[2] on
// channel ARGV[1], a message the pods ignore). A Redis user that lacks
// one of them fails it, with the reason. The fleet runs it before it
// counts itself in sync.
var checkScript = redis.NewScript(`
local function need(what, ...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then
    return redis.error_reply('NOPERM the fleet needs ' .. what .. ': ' .. r.err)
  end
end
local e = need('to write its keys (SET)', 'SET', KEYS[1], '1', 'PX', ARGV[3])
  or need('to publish on ' .. ARGV[1] .. ' (PUBLISH)', 'PUBLISH', ARGV[1], ARGV[2])
if e then return e end
return 1
`)

// maxVersion is the largest version a pod accepts, and the largest Redis
// holds: versions are Lua numbers in Redis, doubles, exact below 2^53.
const maxVersion = 1<<53 - 1
