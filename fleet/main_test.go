package fleet

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests 8 at a time unless -parallel says otherwise:
// they spend their time waiting on real sockets, a real Redis and its
// clock (grant lives, read intervals), not on the CPU, and they judge what
// the pods sent, granted and refused, so running them beside each other
// on 2 cores changes how long the suite takes, not what it shows.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", "8"); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}
