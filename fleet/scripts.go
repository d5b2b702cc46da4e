package fleet

// maxVersion is the largest version a pod accepts, and the largest Redis
// holds: versions are Lua numbers in Redis, doubles, exact below 2^53
// (lua/batch.lua's M).
const maxVersion = 1<<53 - 1
