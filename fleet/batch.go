package fleet

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// A round trip is one pipeline, whatever the number of systems: per Redis
// master, calls of the batch script (lua/batch.lua), each running in
// order up to opsPerCall ops of the systems whose keys that master holds
// (one Redis: every system). Its
// ARGV hold, for each op, its name, its number of keys and of arguments,
// its keys, then its arguments; it returns one reply per op, in order.
//
// On a single Redis the script declares every key in KEYS. On Redis
// Cluster the keys of different systems lie in different slots, and a
// script's declared keys must share one (CROSSSLOT): it declares the
// keys of its first op alone, which route the call to the master of that
// slot, and finds the others in ARGV. clusterBatchScript declares
// allow-cross-slot-keys (Redis 7.0 or later), which lets a script touch
// keys of other slots that the same master holds; the fleet sends each
// master the ops of the systems whose slots it holds. The keys of one
// system share one slot (keyBase's hash tag), so an op may touch the keys
// it builds from its own.

// op is one op of a round trip: what it sends, and what to do with its
// reply.
type op struct {
	name string
	keys []string
	args []any
	// done applies the reply (err nil), or takes its absence: err is the
	// batch's error, or errShape when the reply is not a list of numbers.
	done func(r []int64, err error)
	undo func() // the op was not delivered: put back what was taken for it
}

// errShape is the error of a reply that no op could have sent.
var errShape = fmt.Errorf("fleet: a reply of the wrong shape")

// batch is the ops of one round trip sent to one master, and its call.
type batch struct {
	ops []*op
	cmd *redis.Cmd
}

// opsPerCall is the most ops one call of the batch script carries: Redis
// runs a script alone, and every other client of that Redis waits for it,
// so a round trip of many systems is several calls of at most this many
// ops (about 20 commands inside Redis each), in one pipeline.
const opsPerCall = 8

// send adds to pipe the calls of the batch script for ops: per master, in
// order, at most opsPerCall ops each.
func (f *Fleet) send(ctx context.Context, pipe redis.Pipeliner, ops []*op) []*batch {
	var out []*batch
	byNode := map[string]*batch{}
	for _, o := range ops {
		node := f.nodeOf(ctx, o.keys[0])
		b := byNode[node]
		if b == nil || len(b.ops) == opsPerCall {
			b = &batch{}
			byNode[node] = b
			out = append(out, b)
		}
		b.ops = append(b.ops, o)
	}
	for _, b := range out {
		keys, argv := b.args(f.batch == clusterBatchScript)
		b.cmd = f.batch.EvalSha(ctx, pipe, keys, argv...)
	}
	return out
}

// args are the batch script's KEYS and ARGV for b's ops: KEYS every key,
// or on a cluster the first op's alone.
func (b *batch) args(cluster bool) ([]string, []any) {
	var keys []string
	var argv []any
	for i, o := range b.ops {
		if !cluster || i == 0 {
			keys = append(keys, o.keys...)
		}
		argv = append(argv, o.name, len(o.keys), len(o.args))
		for _, k := range o.keys {
			argv = append(argv, k)
		}
		argv = append(argv, o.args...)
	}
	return keys, argv
}

// nodeOf is the address of the master that holds key on a cluster, ""
// on a single Redis (or when the cluster's map is unknown: the call then
// goes where key's slot says, and fails if another key is elsewhere).
func (f *Fleet) nodeOf(ctx context.Context, key string) string {
	cc, ok := f.rdb.(*redis.ClusterClient)
	if !ok {
		return ""
	}
	c, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return ""
	}
	return c.Options().Addr
}

// settle hands each op its reply, or the batch's error. It returns that
// error.
func (b *batch) settle() error {
	if err := b.cmd.Err(); err != nil {
		for _, o := range b.ops {
			if o.undo != nil {
				o.undo()
			}
			o.done(nil, err)
		}
		return err
	}
	rs, err := b.cmd.Slice()
	if err != nil || len(rs) != len(b.ops) {
		rs = make([]any, len(b.ops)) // each op takes its nil as errShape
	}
	for i, o := range b.ops {
		r, ok := int64s(rs[i])
		if !ok {
			o.done(nil, errShape)
			continue
		}
		o.done(r, nil)
	}
	return nil
}

// int64s reads one op's reply: a list of integers.
func int64s(v any) ([]int64, bool) {
	l, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]int64, len(l))
	for i, x := range l {
		n, ok := x.(int64)
		if !ok {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// runOps runs ops in one batch now, outside the loop (a quota's first
// share, a pod's shares given back), bounded by ctx: the keys of all of
// them on one master.
func (f *Fleet) runOps(ctx context.Context, ops ...*op) error {
	b := &batch{ops: ops}
	keys, argv := b.args(f.batch == clusterBatchScript)
	b.cmd = f.batch.Run(ctx, f.rdb, keys, argv...)
	return b.settle()
}
