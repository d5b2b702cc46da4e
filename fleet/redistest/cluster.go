package redistest

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of three masters and no replicas, each a
// [Server] on a loopback port with persistence off, that a test owns:
// its cleanup stops them and removes their files.
type Cluster struct {
	// Nodes are the masters, in the order they were created (the first
	// holds the slots 0-5460).
	Nodes []*Server
}

// clusterNodes is the number of masters of a Cluster.
const clusterNodes = 3

// StartCluster starts three redis-servers with --cluster-enabled yes,
// joins them with redis-cli --cluster create (no replicas) and waits
// until every node says cluster_state:ok. Like [Start], it skips the
// test when redis-server or redis-cli is not installed (fails it under
// CI=true).
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	bin := serverBin(tb)
	cli := cliBin(tb)
	c := &Cluster{}
	for range clusterNodes {
		c.Nodes = append(c.Nodes, startNode(tb, bin))
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.Nodes {
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.waitOK(tb)
	return c
}

// cliBin finds redis-cli, as serverBin finds redis-server.
func cliBin(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("redis-cli")
	if err != nil {
		skipOrFail(tb, "redis-cli not installed (apt-get install redis-tools): the cluster tests need it")
	}
	return bin
}

// startNode starts one cluster node: its port and its cluster bus port
// (port + 10000) free, its own directory for nodes.conf. A port taken
// between the look and the start is tried again with another.
func startNode(tb testing.TB, bin string) *Server {
	tb.Helper()
	var err error
	for range 5 {
		s := &Server{tb: tb, bin: bin, dir: tb.TempDir(), port: busFreePort(tb),
			args: []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"}}
		if err = s.launch(); err == nil {
			tb.Cleanup(s.Kill)
			return s
		}
	}
	tb.Fatalf("redistest: a cluster node: %v", err)
	return nil
}

// busFreePort returns a free loopback port whose cluster bus port (the
// port + 10000) is free too.
func busFreePort(tb testing.TB) int {
	tb.Helper()
	for range 100 {
		p := freePort(tb)
		if p+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		l.Close()
		return p
	}
	tb.Fatal("redistest: no free port with a free cluster bus port")
	return 0
}

// waitOK waits until every node says cluster_state:ok and knows every
// master, for at most 20s.
func (c *Cluster) waitOK(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range c.Nodes {
		for {
			info, err := n.Do("CLUSTER", "INFO")
			nodes, nerr := n.Do("CLUSTER", "NODES")
			if err == nil && nerr == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Count(nodes, "master") == clusterNodes {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("redistest: the cluster is not ok within 20s: node %s says %q %v", n.Addr(), info, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// URL is the cluster's URL for the fleet: redis:// with cluster=true,
// the first node as its host and the others as addr=.
func (c *Cluster) URL() string {
	u := "redis://" + c.Nodes[0].Addr() + "?cluster=true"
	for _, n := range c.Nodes[1:] {
		u += "&addr=" + n.Addr()
	}
	return u
}

// NodeOf returns the master that holds key's slot.
func (c *Cluster) NodeOf(key string) (*Server, error) {
	n := c.Nodes[0]
	slot, err := n.Do("CLUSTER", "KEYSLOT", key)
	if err != nil {
		return nil, err
	}
	s, err := strconv.Atoi(slot)
	if err != nil {
		return nil, fmt.Errorf("redistest: CLUSTER KEYSLOT %s: %q", key, slot)
	}
	nodes, err := n.Do("CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	addr, ok := ownerOf(nodes, s)
	if !ok {
		return nil, fmt.Errorf("redistest: no master holds slot %d", s)
	}
	for _, n := range c.Nodes {
		if n.Addr() == addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("redistest: slot %d is on %s, not a node of this cluster", s, addr)
}

// ownerOf reads CLUSTER NODES (one line per node: id ip:port@bus flags
// master ping pong epoch link slot...) and returns the ip:port of the
// master that holds slot.
func ownerOf(nodes string, slot int) (string, bool) {
	for line := range strings.Lines(nodes) {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "master") {
			continue
		}
		for _, r := range f[8:] {
			lo, hi, isRange := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			b, err2 := a, error(nil)
			if isRange {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 == nil && err2 == nil && a <= slot && slot <= b {
				addr, _, _ := strings.Cut(f[1], "@")
				return addr, true
			}
		}
	}
	return "", false
}

// CommandStats is [Server.CommandStats] summed over the nodes.
func (c *Cluster) CommandStats() (map[string]CommandStat, error) {
	out := map[string]CommandStat{}
	for _, n := range c.Nodes {
		st, err := n.CommandStats()
		if err != nil {
			return nil, err
		}
		for name, s := range st {
			o := out[name]
			out[name] = CommandStat{Calls: o.Calls + s.Calls, Usec: o.Usec + s.Usec}
		}
	}
	return out, nil
}

// Do sends one command to every node, as [Server.Do] does (CONFIG
// RESETSTAT), and returns the first error.
func (c *Cluster) Do(words ...string) error {
	for _, n := range c.Nodes {
		if _, err := n.Do(words...); err != nil {
			return err
		}
	}
	return nil
}
