-- pause: pauses a system for every pod: it sets the pause key for ms
-- unless a longer pause is in force, and then publishes message. A burst
-- of 429s, from one pod or many, is one message.
--
-- KEYS[1]: the pause, <base>:pause.
-- ARGV[1] channel: the fleet's channel;
-- ARGV[2] ms: the pause, ms;
-- ARGV[3] message: what to publish (message.go: "<system> pause <ms>").
-- Returns {ms of the pause in force, malformed}: a pause key with no
-- expiry is malformed, and replaced.

local ms = num(ARGV[2])
local malformed = 0
local left = redis.call('PTTL', KEYS[1])
if left == -1 then
  malformed = 1
  left = -2
end
if left < ms then
  redis.call('SET', KEYS[1], '1', 'PX', ms)
  redis.call('PUBLISH', ARGV[1], ARGV[3])
  left = ms
end
return {left, malformed}
