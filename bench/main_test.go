package main

import (
	"errors"
	"flag"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRemoteUpstreamCountsTheServersConnections: a client in another
// process reads the bench server's accepted connections through its
// statistics endpoint, and the endpoint's own connection is not counted
// twice; the server's CPU time comes along.
func TestRemoteUpstreamCountsTheServersConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(ln)
	t.Cleanup(func() {
		if err := s.close(); err != nil {
			t.Error(err)
		}
	})
	up, err := remoteUpstream(s.base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.close)
	if !up.remote || up.url != s.base+"/item" {
		t.Fatalf("upstream = %+v, want remote, url %s/item", up, s.base)
	}

	before, err := up.stats()
	if err != nil {
		t.Fatal(err)
	}
	// Three calls that each open a connection of their own.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	for range 3 {
		if err := get(c, up.url); err != nil {
			t.Fatal(err)
		}
	}
	after, err := up.stats()
	if err != nil {
		t.Fatal(err)
	}
	if got := after.conns - before.conns; got != 3 {
		t.Errorf("connections counted = %d, want 3", got)
	}
	if before.cpu <= 0 || after.cpu < before.cpu {
		t.Errorf("server CPU time went from %v to %v, want a positive time that does not go back", before.cpu, after.cpu)
	}
}

// TestRemoteUpstreamRefusesAServerThatIsNotTheBench: -target must name a
// bench -serve; any other server fails at once, not with a column of
// wrong connection counts.
func TestRemoteUpstreamRefusesAServerThatIsNotTheBench(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	for _, target := range []string{srv.URL, "127.0.0.1:1", "ftp://127.0.0.1/"} {
		up, err := remoteUpstream(target)
		if err == nil {
			up.close()
			t.Errorf("remoteUpstream(%q) = nil error, want one", target)
		} else if !strings.Contains(err.Error(), "-target") {
			t.Errorf("remoteUpstream(%q) = %v, want it to name -target", target, err)
		}
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr bool
	}{
		{[]string{"-target", "http://127.0.0.1:1", "-clients", "raw,outbound", "-rounds", "2"}, false},
		{[]string{"-serve", "127.0.0.1:0"}, false},
		{[]string{"-serve", "127.0.0.1:0", "-target", "http://127.0.0.1:1"}, true},
		{[]string{"-hedge", "-target", "http://127.0.0.1:1"}, true},
		{[]string{"-clients", "raw,nope"}, true},
		{[]string{"-inflight", "1,0"}, true},
		{[]string{"-rounds", "0"}, true},
		{[]string{"stray"}, true},
	}
	for _, tt := range tests {
		_, err := parseFlags(tt.args)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseFlags(%q) error = %v, want error: %v", tt.args, err, tt.wantErr)
		}
	}
	if _, err := parseFlags([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("parseFlags(-h) = %v, want flag.ErrHelp", err)
	}
}
