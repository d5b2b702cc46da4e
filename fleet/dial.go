package fleet

import (
	"context"
	"net"
	"time"
)

// go-redis v9 (v9.23.0) logs through one logger for the whole process
// (redis.SetLogger; no option per client), and its pool prints every
// failed dial there, to the standard error by default: with Redis down,
// a line per round trip and per resubscription, 9 to 25 a second per pod.
// Setting that logger would change the log of every other go-redis
// client of the service, so the fleet leaves it alone and keeps its own
// failed dials from the pool instead: its dialer turns one into a
// connection that fails on first use with the dial's error. The round
// trip fails with that error as before, the fleet reports it (Sync,
// Config.Logger), and go-redis has nothing to print.

// quietDial wraps go-redis's dialer: a failed dial is a refusedConn.
func quietDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return refusedConn{err: dialError{err}, addr: dialAddr{network, addr}}, nil
		}
		return c, nil
	}
}

// refusedConn is a dial that failed: every read and write returns its
// error.
type refusedConn struct {
	err  error
	addr net.Addr
}

func (c refusedConn) Read([]byte) (int, error)         { return 0, c.err }
func (c refusedConn) Write([]byte) (int, error)        { return 0, c.err }
func (c refusedConn) Close() error                     { return nil }
func (c refusedConn) LocalAddr() net.Addr              { return c.addr }
func (c refusedConn) RemoteAddr() net.Addr             { return c.addr }
func (c refusedConn) SetDeadline(time.Time) error      { return nil }
func (c refusedConn) SetReadDeadline(time.Time) error  { return nil }
func (c refusedConn) SetWriteDeadline(time.Time) error { return nil }

// dialError is the error of a refusedConn: go-redis unwraps the error of
// a connection it could not set up, and the fleet's report should still
// say "dial tcp <addr>: ...", not only "connect: connection refused".
type dialError struct{ err error }

func (e dialError) Error() string { return e.err.Error() }
func (e dialError) Unwrap() error { return e.err }

// dialAddr is the address a refusedConn was dialled to.
type dialAddr struct{ network, addr string }

func (a dialAddr) Network() string { return a.network }
func (a dialAddr) String() string  { return a.addr }
