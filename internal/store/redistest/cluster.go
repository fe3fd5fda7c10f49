package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Cluster is a real Redis Cluster of three masters, each with one
// replica (six server processes on loopback ports, no persistence),
// created with `redis-cli --cluster create`. Its nodes time out after
// 1 s, so a killed master's replica takes over within a few seconds.
type Cluster struct {
	// URL is a seed (redis://first-node); Seeds are the other nodes.
	URL   string
	Seeds []string
	// Flavor is the server that runs it: "redis" or "valkey".
	Flavor string

	t     testing.TB
	cli   string
	nodes []*Server
	mu    sync.Mutex
}

// Flavors lists the cluster servers installed: "redis" (redis-server and
// redis-cli) and "valkey" (valkey-server and valkey-cli), in that order.
func Flavors() []string {
	var out []string
	for _, f := range []string{"redis", "valkey"} {
		if _, _, err := binaries(f); err == nil {
			out = append(out, f)
		}
	}
	return out
}

func binaries(flavor string) (server, cli string, err error) {
	if server, err = exec.LookPath(flavor + "-server"); err != nil {
		return "", "", err
	}
	cli, err = exec.LookPath(flavor + "-cli")
	return server, cli, err
}

// StartCluster creates a Redis Cluster for the test and stops it at
// cleanup. Without redis-server or redis-cli the test is skipped (failed
// under CI), saying which is missing.
func StartCluster(t testing.TB) *Cluster { return StartClusterOf(t, "redis") }

// StartClusterOf creates a cluster of flavor ("redis" or "valkey").
func StartClusterOf(t testing.TB, flavor string) *Cluster {
	t.Helper()
	server, cli, err := binaries(flavor)
	if err != nil {
		unavailable(t, "a %s cluster needs %s-server and %s-cli: %v", flavor, flavor, flavor, err)
	}
	c := &Cluster{Flavor: flavor, t: t, cli: cli}
	t.Cleanup(c.Stop)
	dir := t.TempDir()
	var addrs []string
	for i := range 6 {
		s, err := startNode(server, filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			unavailable(t, "%s-server in cluster mode did not start: %v", flavor, err)
		}
		c.nodes = append(c.nodes, s)
		addrs = append(addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s --cluster create: %v: %s", flavor, err, lastLines(string(out), 5))
	}
	c.URL = "redis://" + addrs[0]
	c.Seeds = addrs[1:]
	c.WaitOK()
	return c
}

// startNode runs one cluster-enabled server in dir on a free port.
func startNode(bin, dir string) (*Server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var last error
	for range 3 {
		port, err := freePort()
		if err != nil {
			last = err
			continue
		}
		s := &Server{bin: bin, dir: dir, Port: port, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			extra: []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "1000", "--cluster-replica-validity-factor", "0"}}
		s.URL = "redis://" + s.Addr
		if last = s.start(); last == nil {
			return s, nil
		}
	}
	return nil, last
}

// cli runs the cluster's cli against addr and returns its output.
func (c *Cluster) run(addr string, args ...string) (string, error) {
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command(c.cli, append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	return string(out), err
}

// alive are the nodes not killed.
func (c *Cluster) alive() []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Server
	for _, n := range c.nodes {
		if n.running() {
			out = append(out, n)
		}
	}
	return out
}

// WaitOK waits (up to 30 s) until every live node reports cluster_state:ok
// with all 16384 slots served.
func (c *Cluster) WaitOK() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for _, n := range c.alive() {
			out, err := c.run(n.Addr, "cluster", "info")
			if err != nil || !strings.Contains(out, "cluster_state:ok") || !strings.Contains(out, "cluster_slots_ok:16384") {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the %s cluster did not reach cluster_state:ok within 30 s", c.Flavor)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// MasterOf is the address of the master serving key's slot, as a live
// node reports it.
func (c *Cluster) MasterOf(key string) string {
	c.t.Helper()
	n := c.alive()[0]
	out, err := c.run(n.Addr, "cluster", "keyslot", key)
	if err != nil {
		c.t.Fatalf("cluster keyslot: %v %s", err, out)
	}
	slot, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "(integer)")))
	if err != nil {
		c.t.Fatalf("cluster keyslot %q: %q", key, out)
	}
	out, err = c.run(n.Addr, "cluster", "nodes")
	if err != nil {
		c.t.Fatalf("cluster nodes: %v %s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		for _, r := range f[8:] {
			lo, hi, found := strings.Cut(r, "-")
			if !found {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && slot >= a && slot <= b {
				return strings.Split(f[1], "@")[0]
			}
		}
	}
	c.t.Fatalf("no master serves slot %d", slot)
	return ""
}

// KillMaster kills the master at addr (SIGKILL, as a crash would) and
// waits until its replica has taken its slots and the cluster is ok.
func (c *Cluster) KillMaster(addr string) {
	c.t.Helper()
	var victim *Server
	for _, n := range c.alive() {
		if n.Addr == addr {
			victim = n
		}
	}
	if victim == nil {
		c.t.Fatalf("no live node at %s", addr)
	}
	victim.Kill()
	// The survivors first agree that it failed (after the node timeout),
	// then its replica takes its slots and the state is ok again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := c.run(c.alive()[0].Addr, "cluster", "nodes")
		if err == nil && failed(out, addr) {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the cluster did not mark %s failed within 30 s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.WaitOK()
}

// failed reports whether CLUSTER NODES output shows addr failed (not
// merely suspected) and serving no slot.
func failed(nodes, addr string) bool {
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) >= 8 && strings.Split(f[1], "@")[0] == addr {
			flags := "," + f[2] + ","
			return strings.Contains(flags, ",fail,") && len(f) == 8
		}
	}
	return false
}

// Flush empties every master (between uses of one cluster).
func (c *Cluster) Flush() error {
	for _, n := range c.alive() {
		out, err := c.run(n.Addr, "flushall")
		if err != nil && !strings.Contains(out, "READONLY") {
			return fmt.Errorf("flushall on %s: %v %s", n.Addr, err, out)
		}
	}
	return nil
}

// Stop kills every node.
func (c *Cluster) Stop() {
	for _, n := range c.nodes {
		n.Kill()
	}
}
