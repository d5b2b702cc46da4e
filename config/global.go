package config

import "strconv"

// The registry-wide variables: they configure the registry itself, not
// one system, so they are not fields of [Client]. Each one's rule is
// stated once, in the words below, which both the check that reports a
// bad value (load.go, faults.go, fleet.go) and [GlobalReference] use.
const (
	// nameShape is the shape of a system name, as checkName reports it.
	nameShape = "lower case letters, digits, '-' or '_', starting with a letter"
	// faultsShape is the rule of OUTBOUND_FAULTS.
	faultsShape = "on or off (unset: off); on allows the <SYSTEM>_FAULT_* drills"
	// redisURLScheme is what OUTBOUND_FLEET_REDIS_URL must be, as
	// parseRedis checks it (and that it names a host and a port
	// 1..65535 if any).
	redisURLScheme = "a redis:// or rediss:// URL"
	// maxNameLen is the longest system name, in bytes.
	maxNameLen = 63
	// namespaceShape is the shape of OUTBOUND_FLEET_NAMESPACE.
	namespaceShape = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
	// namespaceNeeded is when OUTBOUND_FLEET_NAMESPACE must be set.
	namespaceNeeded = "required with " + FleetRedisURLVar
)

// globals documents the registry-wide variables, in the order
// [GlobalReference] lists them.
var globals = [...]Var{
	{Name: SystemsVar, Type: "list",
		Rule:        "comma separated system names, each " + nameShape + ", at most " + strconv.Itoa(maxNameLen) + " bytes, not outbound, listed once",
		Description: "systems to configure, in addition to those declared in code"},
	{Name: FaultsVar, Type: "string", Default: "off", Rule: faultsShape,
		Description: "allows fault injection (drills, docs/fault-drills.md); off: any <SYSTEM>_FAULT_* variable is a problem"},
	{Name: FleetRedisURLVar, Type: "url", Rule: redisURLScheme + " naming a host, port 1..65535 if any, the database as its path (/3) or db=; a Redis Cluster's with cluster=true (more of its nodes as addr=host:port, database 0 only); options " + redisOptions + " and no other; unset: no fleet", Secret: true,
		Description: "Redis of the fleet-shared breaker and quota (systems at BREAKER_SCOPE=fleet or RATE_SCOPE=fleet)"},
	{Name: FleetNamespaceVar, Type: "string", Rule: namespaceShape + "; " + namespaceNeeded,
		Description: "prefix of the fleet's Redis keys: two services on one Redis never share a breaker or a quota"},
	{Name: FileVar, Type: "string", Rule: "a readable file of KEY=VALUE lines (outbound env --format dotenv); unset: none",
		Description: "settings read over the environment at start and watched: a valid change is applied while the service runs, an invalid one refused whole"},
}

// GlobalReference documents the registry-wide variables (OUTBOUND_*):
// their type, default, rule and description, System empty. A secret one
// (OUTBOUND_FLEET_REDIS_URL, whose password is redacted in every report)
// is marked Secret. Each call returns a new slice.
func GlobalReference() []Var {
	return append([]Var(nil), globals[:]...)
}
