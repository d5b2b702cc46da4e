-- check: proves that a pod may do all the fleet needs: run a script,
-- write a key and publish. A Redis user that lacks one of them fails it,
-- with the reason. A script of its own (not an op of the batch).
--
-- KEYS[1]: the pod's check key, <prefix>:pod:<holder>.
-- ARGV[1] channel: the fleet's channel;
-- ARGV[2] message: what to publish, a message the pods ignore
--   (message.go: "hello <holder>");
-- ARGV[3] life: how long the check key lives, ms.
-- Returns 1, or the refusal ("NOPERM the fleet needs ...").

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
