-- lease: takes one probe lease of a half-open state. Leases of the open
-- state of version v are <base>:probe:<v>:<i>, i in 1..probes, taken
-- with SET NX PX; a lease with no expiry, or one longer than the pod's
-- lease life, is given the pod's (malformed). (breaker.lua comes first.)
--
-- KEYS[1]: the state hash.
-- ARGV[1..4]: base, channel, system, open (breaker.lua);
-- ARGV[5] version: the open version the pod saw half-open;
-- ARGV[6] probes: BREAKER_HALF_OPEN_PROBES;
-- ARGV[7] life: a lease's life, ms;
-- ARGV[8] holder: the pod's name.
-- Returns the state (breaker.lua), then the lease's number, or 0.

local ver, lease = int(ARGV[5], M), num(ARGV[7])
if ver and v == ver and s == 1 and now >= u then
  for i = 1, num(ARGV[6]) do
    local key = base .. ':probe:' .. fmt(v) .. ':' .. i
    local ttl = redis.call('PTTL', key)
    if ttl == -1 or ttl > lease then
      redis.call('PEXPIRE', key, lease)
      malformed = malformed + 1
    end
    if redis.call('SET', key, ARGV[8], 'NX', 'PX', lease) then
      return reply(i)
    end
  end
end
return reply(0)
