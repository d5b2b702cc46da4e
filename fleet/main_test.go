package fleet

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs more of the package's tests side by side than go test's
// default (-parallel GOMAXPROCS) unless -test.parallel is given: they
// wait on Redis, tickers and sockets far more than they compute (a run
// of them keeps less than one core busy), so on 2 cores the default
// would run them mostly one after another. Each judges what the fleet
// granted, sent or refused, not how soon, so a crowded run only takes
// longer.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", fmt.Sprint(4*runtime.GOMAXPROCS(0))); err != nil {
			fmt.Fprintln(os.Stderr, "fleet tests:", err)
			os.Exit(2)
		}
	}
	goleak.VerifyTestMain(m)
}
