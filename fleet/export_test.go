package fleet

// OpsPerCall is opsPerCall, for the tests of the package's users.
const OpsPerCall = opsPerCall
