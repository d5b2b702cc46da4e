-- probe: records the result of a half-open probe of an open state: a
-- failure opens again, the last of the probes' successes closes. A
-- stale version, or a state still open, changes nothing: a writer that
-- missed a change can never undo it. (breaker.lua comes first.)
--
-- KEYS[1]: the state hash.
-- ARGV[1..4]: base, channel, system, open (breaker.lua);
-- ARGV[5] version: the open version the probe ran in;
-- ARGV[6] ok: 1 the probe succeeded, 0 it failed;
-- ARGV[7] probes: BREAKER_HALF_OPEN_PROBES.
-- Returns the state (breaker.lua).

local ver = int(ARGV[5], M)
if ver and v == ver and s == 1 and now >= u then
  if ARGV[6] == '1' then
    local got = redis.call('HGET', KEYS[1], 'k')
    local k = int(got, M)
    if got and not k then malformed = malformed + 1 end
    k = (k or 0) + 1
    if k >= num(ARGV[7]) then
      set(after(), 0, 0)
    else
      redis.call('HSET', KEYS[1], 'k', fmt(k))
    end
  else
    set(after(), 1, now + open)
  end
end
return reply()
