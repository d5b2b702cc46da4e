package registry

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// test must close its registry (idle connections) and its servers.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
