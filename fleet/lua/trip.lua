-- trip: opens the closed state of a version: a pod's own breaker
-- tripped. A stale version changes nothing. (breaker.lua comes first.)
--
-- KEYS[1]: the state hash.
-- ARGV[1..4]: base, channel, system, open (breaker.lua);
-- ARGV[5] version: the closed version the pod saw trip.
-- Returns the state (breaker.lua).

local ver = int(ARGV[5], M)
if ver and v == ver and s == 0 then
  set(after(), 1, now + open)
end
return reply()
