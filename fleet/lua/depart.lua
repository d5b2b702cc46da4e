-- depart: takes a pod out of the count of the pods when its fleet
-- closes.
--
-- KEYS[1]: the namespace's pods (presence.lua).
-- ARGV[1] holder: the pod's name.
-- Returns {}.

redis.pcall('ZREM', KEYS[1], ARGV[1])
return {}
