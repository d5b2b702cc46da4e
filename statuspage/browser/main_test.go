package browser_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: the
// browser test must stop Chromium and every chromedp goroutine.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
