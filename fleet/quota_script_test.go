package fleet

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/outbound-go/outbound/fleet/redistest"
)

// grantsOn runs the quota's op on srv for pods of a quota of limit (in
// micro-requests per second, as the pods write it).
type grantsOn struct {
	t     *testing.T
	rdb   *redis.Client
	limit int64
}

func newGrants(t *testing.T, limit int64) grantsOn {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return grantsOn{t: t, rdb: rdb, limit: limit}
}

// ask is one pod's tick: it wants want and may still send at ack; it
// returns the grant and the live pods.
func (g grantsOn) ask(pod string, want, ack int64) (grant, pods int64) {
	g.t.Helper()
	argv := []any{"quota", 2, 8, pod, g.limit, want, ack, g.limit, 1100, 5000, g.limit}
	rs, err := batchScript.Run(context.Background(), g.rdb, []string{"q", "p"}, argv...).Slice()
	var r []int64
	if err == nil && len(rs) == 1 {
		r, _ = int64s(rs[0])
	}
	if err != nil || len(r) != 6 {
		g.t.Fatalf("quota op: %v %v", rs, err)
	}
	return r[0], r[1]
}

// TestGrantNeverTakesWhatAnotherPodMayStillSend: pod a sends at the
// whole limit; when b wants most of it, a's grant is cut, but b gets
// only what a no longer holds: a may still send at its old rate until
// it says (on its next tick) that it applied the cut.
func TestGrantNeverTakesWhatAnotherPodMayStillSend(t *testing.T) {
	g := newGrants(t, 100)
	if got, _ := g.ask("a", 100, 0); got != 100 {
		t.Fatalf("a alone, wanting all: granted %d, want 100", got)
	}
	if got, _ := g.ask("a", 100, 100); got != 100 {
		t.Fatalf("a again: granted %d", got)
	}
	if got, _ := g.ask("b", 100, 0); got != 0 {
		t.Errorf("b while a sends at 100: granted %d, want 0", got)
	}
	// a's tick: cut to its fair half; it still sends at 100 until the
	// reply, and says so: it holds 100.
	if got, _ := g.ask("a", 100, 100); got != 50 {
		t.Errorf("a, b wanting as much: granted %d, want 50", got)
	}
	if got, _ := g.ask("b", 100, 0); got != 0 {
		t.Errorf("b before a applied its cut: granted %d, want 0", got)
	}
	if got, _ := g.ask("a", 100, 50); got != 50 {
		t.Errorf("a, having applied its cut: granted %d, want 50", got)
	}
	if got, _ := g.ask("b", 100, 0); got != 50 {
		t.Errorf("b once a applied its cut: granted %d, want 50", got)
	}
}

// TestGrantsAreMaxMinFair: wants of 10, 50 and 500 of a limit of 200
// settle at 10, 50 and 140; wants of 10 and 10 of 100 at 50 each (what
// nobody wants is split evenly).
func TestGrantsAreMaxMinFair(t *testing.T) {
	g := newGrants(t, 200)
	wants := map[string]int64{"a": 10, "b": 50, "c": 500}
	got := map[string]int64{}
	for range 4 { // each pod's tick, a few times: the holds settle
		for _, p := range []string{"a", "b", "c"} {
			got[p], _ = g.ask(p, wants[p], got[p])
		}
	}
	if got["a"] != 10 || got["b"] != 50 || got["c"] != 140 {
		t.Errorf("grants %v, want a 10, b 50, c 140", got)
	}
	g = newGrants(t, 100)
	var a, b int64
	for range 3 {
		a, _ = g.ask("a", 10, a)
		b, _ = g.ask("b", 10, b)
	}
	if a != 50 || b != 50 {
		t.Errorf("grants a %d, b %d; want 50 each", a, b)
	}
}
