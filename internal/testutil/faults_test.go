package testutil_test

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/outbound-go/outbound/internal/testutil"
	"github.com/outbound-go/outbound/outboundtest"
)

// Fault handlers, listeners and cleanup behaviour. Every check is on the
// kind of error (timeout, reset, EOF, refused), never on how long it took.

func TestBlackhole(t *testing.T) {
	addr := testutil.Blackhole(t)
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	c, err := d.Dial("tcp4", addr)
	if err == nil {
		c.Close()
		t.Fatalf("dial %s succeeded, want a timeout", addr)
	}
	if !isTimeout(err) {
		t.Fatalf("dial %s: err = %v, want a net.Error timeout", addr, err)
	}
}

func TestRefusedAddr(t *testing.T) {
	addr := testutil.RefusedAddr(t)
	d := net.Dialer{Timeout: callTimeout}
	c, err := d.Dial("tcp4", addr)
	if err == nil {
		c.Close()
		t.Fatalf("dial %s succeeded, want connection refused", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: err = %v, want syscall.ECONNREFUSED", addr, err)
	}
}

func TestTLSHang(t *testing.T) {
	addr := testutil.TLSHang(t)

	t.Run("tls.Dial", func(t *testing.T) {
		d := &net.Dialer{Timeout: 200 * time.Millisecond} // covers the handshake too
		c, err := tls.DialWithDialer(d, "tcp4", addr, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			c.Close()
			t.Fatal("handshake succeeded, want a timeout")
		}
		if !isTimeout(err) {
			t.Fatalf("err = %v, want a net.Error timeout", err)
		}
	})
	t.Run("TLSHandshakeTimeout", func(t *testing.T) {
		c, tr := newClient(t)
		tr.TLSHandshakeTimeout = 200 * time.Millisecond
		_, err := do(c, http.MethodGet, "https://"+addr+"/", "", callTimeout)
		if !isTimeout(err) {
			t.Fatalf("err = %v, want a net.Error timeout", err)
		}
	})
}

// TestCheckFDs checks both CheckFDs and that the helpers release every
// socket in cleanup.
func TestCheckFDs(t *testing.T) {
	// Warm up the runtime's netpoller so its descriptors are in the baseline.
	t.Run("warmup", func(t *testing.T) {
		c, _ := newClient(t)
		get(t, c, testutil.Script(t).URL)
	})
	before := testutil.CheckFDs(t)
	if before == 0 {
		t.Skip("no /proc/self/fd on this platform")
	}
	t.Run("inner", func(t *testing.T) {
		c, _ := newClient(t)
		srv := testutil.Script(t, outboundtest.Reply{Body: "ok"})
		get(t, c, srv.URL)
		testutil.Blackhole(t)
		testutil.RefusedAddr(t)
		testutil.TLSHang(t)
		if during := testutil.CheckFDs(t); during <= before {
			t.Errorf("CheckFDs() = %d with sockets open, want > %d", during, before)
		}
	})
	testutil.Eventually(t, callTimeout, "descriptors to be released", func() bool { return testutil.CheckFDs(t) <= before })
}
