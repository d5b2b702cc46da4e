package fleet

import (
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The fleet's Lua lives in lua/, one file per op, each naming its KEYS
// and ARGV in its header; the scripts' text holds no Go value (every
// value is an argument). The batch script (lua/batch.lua) runs the ops of
// one round trip: each op becomes a function of its own KEYS and ARGV,
// the ops of a breaker after lua/breaker.lua, which reads the state.

//go:embed lua/*.lua
var luaFiles embed.FS

// luaFile is the text of lua/<name>.lua.
func luaFile(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic("fleet: no lua/" + name + ".lua") // embedded: found at build
	}
	return string(b)
}

// batchOps are the ops of the batch script, and whether each is a
// breaker's (lua/breaker.lua first).
var batchOps = []struct {
	name    string
	breaker bool
}{
	{"sync", true}, {"trip", true}, {"probe", true}, {"lease", true}, {"restore", true},
	{"quota", false}, {"pause", false}, {"leave", false}, {"presence", false}, {"depart", false},
}

// batchSource is the batch script's text, after head (a shebang line or
// nothing).
func batchSource(head string) string {
	var ops strings.Builder
	for _, o := range batchOps {
		ops.WriteString("ops['" + o.name + "'] = function(KEYS, ARGV)\n")
		if o.breaker {
			ops.WriteString(luaFile("breaker"))
		}
		ops.WriteString(luaFile(o.name))
		ops.WriteString("end\n")
	}
	return head + strings.Replace(luaFile("batch"), "-- ops\n", ops.String(), 1)
}

// The fleet's scripts: the batch script on a single Redis, and on a
// master of a Redis Cluster (batch.go); an operator's override
// (lua/force.lua); the check of the rights (lua/check.lua). A Script is
// its text and its SHA: never changed.
var (
	batchScript        = redis.NewScript(batchSource(""))
	clusterBatchScript = redis.NewScript(batchSource("#!lua flags=allow-cross-slot-keys\n"))
	forceScript        = redis.NewScript(luaFile("force"))
	checkScript        = redis.NewScript(luaFile("check"))
)
