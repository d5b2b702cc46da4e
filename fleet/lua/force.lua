-- force: writes an operator's override of a system's breaker, or
-- releases it, and publishes the change. A script of its own (not an op
-- of the batch).
--
-- KEYS[1]: the override, <base>:force.
-- ARGV[1] channel: the fleet's channel;
-- ARGV[2] state: "open" or "closed", or "" to release;
-- ARGV[3] ms: how long the override lasts, ms;
-- ARGV[4] message: what to publish (message.go:
--   "<system> force <open|closed|-> <ms>").
-- Returns 1.

if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
redis.call('PUBLISH', ARGV[1], ARGV[4])
return 1
