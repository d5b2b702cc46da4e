// Package redistest runs a real redis-server for tests: on a free loopback
// port, in the test's temporary directory, persistence off. A test can
// kill it, pause it (SIGSTOP), resume it and restart it empty, to drill
// what a fleet does when its Redis fails.
//
// When redis-server is not installed, [Start] skips the test with a
// message saying how to install it; under CI=true it fails the test
// instead, so that CI cannot pass by skipping.
package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one redis-server process that a test owns. Its methods are
// safe for concurrent use; the test's cleanup stops it.
type Server struct {
	tb   testing.TB
	bin  string
	dir  string
	port int
	args []string // more arguments of redis-server (a cluster node's)

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has exited
}

// startWait is how long a start waits for redis-server to answer PING:
// long enough for a starved machine; the wait ends at the first answer.
const startWait = 60 * time.Second

// pingTimeout bounds one PING of launch.
const pingTimeout = 5 * time.Second

// Start starts a redis-server on a free loopback port and stops it when
// the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{tb: tb, bin: serverBin(tb), dir: tb.TempDir(), port: freePort(tb)}
	s.start()
	tb.Cleanup(s.Kill)
	return s
}

// serverBin finds redis-server, or skips the test (fails it under
// CI=true).
func serverBin(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		skipOrFail(tb, "redis-server not installed (apt-get install redis-server): the fleet tests need a real Redis")
	}
	return bin
}

// skipOrFail skips the test with msg, or fails it under CI=true, so
// that CI cannot pass by skipping.
func skipOrFail(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

func freePort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is the redis:// URL of the server.
func (s *Server) URL() string { return "redis://" + s.Addr() }

func (s *Server) start() {
	s.tb.Helper()
	if err := s.launch(); err != nil {
		s.tb.Fatalf("redistest: %v", err)
	}
}

// launch starts redis-server and waits until it answers PING, for at
// most 10s; it fails at once when the process exits first (a port taken
// meanwhile).
func (s *Server) launch() error {
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--loglevel", "warning"}, s.args...)
	cmd := exec.Command(s.bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	// The server stands for a Redis of its own host: it runs at the
	// default priority, not at the lowest a starved test binary may run
	// at (nice -n 19) and pass on to it. Raising it back needs the right
	// to (root, CAP_SYS_NICE); without it the server keeps the test's.
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, 0)
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	for deadline := time.Now().Add(startWait); time.Now().Before(deadline); {
		select {
		case <-done:
			s.Kill()
			return fmt.Errorf("redis-server on %s exited: %s", s.Addr(), strings.TrimSpace(out.String()))
		default:
		}
		if s.ping() {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Kill()
	return fmt.Errorf("redis-server on %s did not answer PING within %v", s.Addr(), startWait)
}

// ping sends PING on a fresh connection and reports whether PONG came back.
// Its bound is long: a test binary starved of CPU may read the answer
// seconds after it came, and a read past its deadline fails even then.
func (s *Server) ping() bool {
	c, err := net.DialTimeout("tcp", s.Addr(), pingTimeout)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(pingTimeout))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// Kill stops the server at once (SIGKILL) and waits for it to exit. It is
// a no-op when the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT) // a paused process must run to die cleanly
	cmd.Process.Kill()
	<-done
}

// Pause stops the server's process (SIGSTOP): connections stay open and
// every command hangs, as with a Redis stuck in a long fork or a VM pause.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Signal(sig)
	}
}

// Restart starts the server again, on the same port and empty (nothing
// is persisted), after [Server.Kill].
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	s.start()
}

// doTimeout bounds Do's dial and its round trip.
const doTimeout = 30 * time.Second

// Do sends one command (its words, inline) on a fresh connection and
// returns the raw reply, for tests that look at the server directly
// (INFO commandstats, FLUSHALL). Bulk and multi-bulk replies are returned
// with their framing; it is meant for text replies.
func (s *Server) Do(words ...string) (string, error) {
	// Bounds for a starved machine, where a Redis started by a test at
	// the test's low priority may answer seconds late: the tests judge
	// what the pods do, not how quickly the server answers them.
	c, err := net.DialTimeout("tcp", s.Addr(), doTimeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(doTimeout))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(words))
	for _, w := range words {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(w), w)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	switch head[0] {
	case '$':
		n, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '-':
		return "", fmt.Errorf("redis: %s", strings.TrimSpace(head[1:]))
	}
	return strings.TrimSpace(head[1:]), nil
}

// CommandCalls returns the calls of each command since the server started
// or since the last CONFIG RESETSTAT, from INFO commandstats, keyed by
// lower-case command name ("evalsha", "publish").
func (s *Server) CommandCalls() (map[string]int, error) {
	stats, err := s.CommandStats()
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(stats))
	for name, st := range stats {
		out[name] = st.Calls
	}
	return out, nil
}

// CommandStat is one command's line of INFO commandstats: its calls and
// the CPU time Redis spent running them, in microseconds (for a script:
// everything the script ran).
type CommandStat struct {
	Calls int
	Usec  int64
}

// CommandStats returns INFO commandstats since the server started or
// since the last CONFIG RESETSTAT, keyed by lower-case command name.
func (s *Server) CommandStats() (map[string]CommandStat, error) {
	info, err := s.Do("INFO", "commandstats")
	if err != nil {
		return nil, err
	}
	return ParseCommandStats(info), nil
}

// ParseCommandStats reads the text of INFO commandstats
// (cmdstat_evalsha:calls=12,usec=340,...).
func ParseCommandStats(info string) map[string]CommandStat {
	out := map[string]CommandStat{}
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st CommandStat
		for field := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			switch k {
			case "calls":
				st.Calls, _ = strconv.Atoi(v)
			case "usec":
				st.Usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out
}

// CPU returns the CPU time the server's process has used since it
// started (INFO cpu: used_cpu_user + used_cpu_sys), which counts what
// INFO commandstats does not: reading and writing the sockets.
func (s *Server) CPU() (time.Duration, error) {
	info, err := s.Do("INFO", "cpu")
	if err != nil {
		return 0, err
	}
	return ParseCPU(info), nil
}

// ParseCPU reads used_cpu_user and used_cpu_sys from the text of INFO cpu.
func ParseCPU(info string) time.Duration {
	var secs float64
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, _ := strconv.ParseFloat(v, 64)
			secs += f
		}
	}
	return time.Duration(secs * float64(time.Second))
}
