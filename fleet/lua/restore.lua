-- restore: writes back a state Redis lost. It applies only when Redis
-- holds an older version, as after a restart that came back empty, and
-- only a state the pods accept (a version in range, open at most open).
-- (breaker.lua comes first.)
--
-- KEYS[1]: the state hash.
-- ARGV[1..4]: base, channel, system, open (breaker.lua);
-- ARGV[5] version: the pod's version;
-- ARGV[6] s: 0 closed, 1 open;
-- ARGV[7] left: ms left open.
-- Returns the state (breaker.lua).

local ver, ns, ms = int(ARGV[5], M), int(ARGV[6], 1), int(ARGV[7], open)
if not (ver and ns and ms) then
  malformed = malformed + 1
elseif v < ver then
  local nu = 0
  if ns == 1 then nu = now + ms end
  set(ver, ns, nu)
end
return reply()
