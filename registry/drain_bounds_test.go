package registry

import (
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type stalled struct {
	r      io.Reader
	closed chan struct{}
	n      atomic.Int32
}

func (s *stalled) Read(p []byte) (int, error) {
	if n, err := s.r.Read(p); n > 0 || err == nil {
		return n, err
	}
	<-s.closed // stall until closed, as a socket would
	return 0, errors.New("closed")
}

func (s *stalled) Close() error {
	if s.n.Add(1) == 1 {
		close(s.closed)
	}
	return nil
}

// A body that stalls after a few bytes is cut after drainMaxWait, not held
// (uncut, it would stall for ever; the bound leaves a loaded machine its
// slack).
func TestCloseBoundedInTime(t *testing.T) {
	b := &stalled{r: strings.NewReader("abc"), closed: make(chan struct{})}
	start := time.Now()
	_ = drainClose(b, -1, nil)
	if took := time.Since(start); took > 100*drainMaxWait {
		t.Fatalf("drainClose took %v, want about %v", took, drainMaxWait)
	}
	if b.n.Load() < 1 {
		t.Fatal("body not closed")
	}
}

// A body known to be longer than drainMaxBytes is not read at all.
func TestCloseSkipsLongBody(t *testing.T) {
	r := strings.NewReader(strings.Repeat("x", 10))
	_ = drainClose(io.NopCloser(r), drainMaxBytes+1, nil)
	if r.Len() != 10 {
		t.Fatalf("read %d bytes of a body known to be too long", 10-r.Len())
	}
	r = strings.NewReader(strings.Repeat("x", 10))
	_ = drainClose(io.NopCloser(r), -1, nil)
	if r.Len() != 0 {
		t.Fatalf("left %d bytes of a short body of unknown length", r.Len())
	}
}

// eofSeen records whether a read met the end of its body: net/http puts
// a connection back in its pool only once the body's end is read.
type eofSeen struct {
	io.Reader
	eof bool
}

func (e *eofSeen) Read(p []byte) (int, error) {
	n, err := e.Reader.Read(p)
	if err == io.EOF {
		e.eof = true
	}
	return n, err
}

func (e *eofSeen) Close() error { return nil }

// A body of unknown length and exactly drainMaxBytes is read to its end, so
// that its connection is reused.
func TestCloseReadsTheEndOfABodyOfMaxBytes(t *testing.T) {
	b := &eofSeen{Reader: strings.NewReader(strings.Repeat("x", drainMaxBytes))}
	_ = drainClose(b, -1, nil)
	if !b.eof {
		t.Fatal("a body of exactly drainMaxBytes was read without its end: its connection would be lost")
	}
}
