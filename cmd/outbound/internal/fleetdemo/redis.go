package fleetdemo

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

const (
	// redisStartTimeout bounds the wait for the demo's redis-server to
	// answer PING.
	redisStartTimeout = 5 * time.Second
	// redisPollEvery is the pause between two PINGs while it starts.
	redisPollEvery = 20 * time.Millisecond
)

// redisServer is the demo's own redis-server.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	dir  string
}

// startRedis starts redis-server (the binary bin) on a free loopback
// port, persistence off, in a temporary directory, and waits for it to
// answer PING.
func startRedis(bin string) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "outbound-demo-redis-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	rs := &redisServer{addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, dir: dir}
	for deadline := time.Now().Add(redisStartTimeout); time.Now().Before(deadline); time.Sleep(redisPollEvery) {
		if rs.pong() {
			return rs, nil
		}
	}
	rs.stop()
	return nil, fmt.Errorf("redis-server on %s did not answer within %v", rs.addr, redisStartTimeout)
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// pong reports whether the server answers PING.
func (rs *redisServer) pong() bool {
	c, err := net.DialTimeout("tcp", rs.addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprint(c, "PING\r\n"); err != nil {
		return false
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.HasPrefix(line, "+PONG")
}

// stop kills the server and removes its directory.
func (rs *redisServer) stop() {
	_ = rs.cmd.Process.Kill()
	_ = rs.cmd.Wait()
	os.RemoveAll(rs.dir)
}
