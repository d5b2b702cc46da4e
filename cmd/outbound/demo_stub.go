package main

import (
	"context"
	"fmt"
	"io"
)

// runDemo is a placeholder until the demo is built: delete this file and
// define runDemo in demo.go with the same signature.
func runDemo(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "demo: not built yet")
	return exitUsage
}
