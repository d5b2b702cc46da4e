-- sync: adds a pod's counts to the window of the closed state, drops the
-- buckets older than the window, and trips the state open when the
-- fleet's totals break the rule; it reads the operator's override too.
-- With zero counts it is the periodic read of the state. (breaker.lua
-- comes first.)
--
-- KEYS[1]: the state hash; KEYS[2]: the override, <base>:force ("open"
--   or "closed", its expiry the time left).
-- ARGV[1..4]: base, channel, system, open (breaker.lua);
-- ARGV[5] requests: the pod's requests since its last sync;
-- ARGV[6] failures: the pod's failures since its last sync;
-- ARGV[7] bucket: the window's bucket, ms;
-- ARGV[8] buckets: the window's buckets;
-- ARGV[9] min requests: BREAKER_MIN_REQUESTS;
-- ARGV[10] ratio: the failure ratio that trips;
-- ARGV[11] most force: the longest override, ms;
-- ARGV[12] read force: 1 to read the override, 0 not (it comes by
--   message; the key is read with every periodic read of the state).
-- Returns the state (breaker.lua), then the window's requests and
-- failures, the override (0 none, 1 open, 2 closed, -1 not read) and its
-- ms left.
--
-- The window of the closed state of version v is the hash <base>:win:<v>,
-- one field per bucket (r<bucket>: requests, f<bucket>: failures). A
-- field that is not that with a count, a bucket in the future, more
-- failures than requests, is deleted (malformed); a window that is not a
-- small hash (batch.lua: at most 64 fields) is deleted whole. The window's expiry is set after its
-- counts, at a bucket's first count: a window nobody writes to expires
-- once its last bucket has left the window. An override that is not
-- "open" or "closed", or a key of another type, is garbage; one with no
-- expiry or past most force is cut to it.

local R, F = 0, 0
if s == 0 then
  local win = base .. ':win:' .. fmt(v)
  local req, fail = num(ARGV[5]), num(ARGV[6])
  local bms, n = num(ARGV[7]), num(ARGV[8])
  local b = math.floor(now / bms)
  local cur = fmt(b) -- this bucket, as its fields name it
  local read, added = fail > 0 or ARGV[13] == '1', false
  if req > 0 and not read then
    -- Requests alone go in at once; the window is read only when they
    -- open a bucket, or when the field holds no count (the read deletes
    -- it, and they go in after).
    local x = redis.pcall('HINCRBY', win, 'r' .. cur, req)
    if type(x) ~= 'number' then
      read = true
    elseif x == req then
      redis.call('PEXPIRE', win, bms * (n + 1))
      read, added = true, true
    end
  end
  if not read then
    R, F = -1, -1
  else
    local all = small(win)
    if not all then
      garbage(win)
      all, added = {}, false
    end
    local r, f, dead, failed = {}, {}, {}, false
    for i = 1, #all, 2 do
      local k, x = all[i], all[i + 1]
      x = counts[x] or count(x) -- HGETALL: strings
      local at = buckets[k]
      if at == nil then at = bucket(k) end
      local side = r
      if at and at < 0 then at, side = -at, f end
      if not x or not at or at > b then
        dead[#dead + 1] = k
        malformed = malformed + 1
      elseif at <= b - n then
        dead[#dead + 1] = k
      elseif side == r then
        r[at], R = x, R + x
      else
        f[at], F, failed = x, F + x, true
      end
    end
    if failed then
      for at, x in pairs(f) do
        local y = r[at] or 0
        if x > y then
          dead[#dead + 1], dead[#dead + 2] = 'r' .. fmt(at), 'f' .. fmt(at)
          malformed = malformed + 1
          r[at], f[at], R, F = nil, nil, R - y, F - x
        end
      end
    end
    if #dead > 0 then hdel(win, dead) end
    if req > 0 and not added then
      if redis.call('HINCRBY', win, 'r' .. cur, req) == req then
        redis.call('PEXPIRE', win, bms * (n + 1))
      end
      if fail > 0 then redis.call('HINCRBY', win, 'f' .. cur, fail) end
      R, F = R + req, F + fail
    end
    if R > 0 and R >= num(ARGV[9]) and F >= num(ARGV[10]) * R then
      redis.call('DEL', win)
      set(after(), 1, now + open)
    end
  end
end
local fs, fms, most = 0, 0, num(ARGV[11])
local val = false
if ARGV[12] == '1' then
  val = redis.pcall('GET', KEYS[2])
else
  fs = -1
end
if type(val) == 'table' then
  garbage(KEYS[2])
elseif val then
  if val == 'open' then fs = 1 elseif val == 'closed' then fs = 2 else garbage(KEYS[2]) end
  if fs > 0 then
    fms = redis.call('PTTL', KEYS[2])
    if fms < 0 or fms > most then
      fms = most
      redis.call('PEXPIRE', KEYS[2], fms)
      capped = capped + 1
    end
  end
end
return reply(R, F, fs, fms)
