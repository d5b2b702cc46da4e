package statuspage_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them. The
// browser test lives in the statuspage/browser module.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
