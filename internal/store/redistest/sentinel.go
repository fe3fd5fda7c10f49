package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinels is a primary with one replica, watched by Redis Sentinels
// (redis-server --sentinel) with short timeouts: a primary that stops
// answering is down after 1 s and its replica promoted a few seconds
// later.
type Sentinels struct {
	// Master is the name the sentinels know the primary by; Addrs are
	// theirs (host:port), for redis.sentinel.
	Master string
	Addrs  []string
	// Primary and Replica are the data servers as started; after
	// KillPrimary the replica is the primary.
	Primary, Replica *Server

	t testing.TB
}

// sentinelTimeouts: down after 1 s without an answer; a failover that
// stalls is retried after a few seconds (failover-timeout also bounds
// reconfiguring the replicas).
const sentinelTimeouts = "sentinel down-after-milliseconds %[1]s 1000\n" +
	"sentinel failover-timeout %[1]s 3000\nsentinel parallel-syncs %[1]s 1\n"

// StartSentinels runs a primary, a replica of it and n sentinels
// (quorum: a majority of them) watching it as master, on free loopback
// ports; everything stops at cleanup. It returns once the replica is in
// sync and every sentinel knows the replica and the other sentinels, so
// that a failover can start at once. Without redis-server the test is
// skipped (failed under CI).
func StartSentinels(t testing.TB, master string, n int) *Sentinels {
	t.Helper()
	g := &Sentinels{Master: master, t: t, Primary: Start(t)}
	g.Replica = startReplica(t, g.Primary)
	for range n {
		g.Addrs = append(g.Addrs, startSentinel(t, g.Primary, master, n/2+1))
	}
	g.waitReady(n)
	return g
}

// StartSentinel runs one sentinel (quorum 1) watching primary under the
// name master and returns its address; it stops at cleanup.
func StartSentinel(t testing.TB, primary *Server, master string) string {
	t.Helper()
	return startSentinel(t, primary, master, 1)
}

func startSentinel(t testing.TB, primary *Server, master string, quorum int) string {
	t.Helper()
	dir := t.TempDir()
	port, err := freePort()
	if err != nil {
		unavailable(t, "no free port: %v", err)
	}
	// The sentinel rewrites this file as it learns the topology.
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\nsentinel monitor %s 127.0.0.1 %d %d\n", port, master, primary.Port, quorum) +
		fmt.Sprintf(sentinelTimeouts, master)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, bin: primary.bin, dir: dir, Port: port, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	s.confFirst = conf
	s.extra = []string{"--sentinel"}
	t.Cleanup(s.Kill)
	if err := s.start(); err != nil {
		unavailable(t, "redis-server --sentinel did not start: %v", err)
	}
	return s.Addr
}

// startReplica runs a replica of primary.
func startReplica(t testing.TB, primary *Server) *Server {
	t.Helper()
	s := &Server{t: t, bin: primary.bin, dir: t.TempDir(),
		extra: []string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.Port)}}
	t.Cleanup(s.Kill)
	if err := s.startOnFreePort(); err != nil {
		unavailable(t, "a replica did not start: %v", err)
		return nil
	}
	return s
}

// waitReady waits (up to 30 s) until the replica is in sync and each of
// the n sentinels sees the replica and the n-1 others.
func (g *Sentinels) waitReady(n int) {
	g.t.Helper()
	ctx := context.Background()
	g.poll(30*time.Second, "the replica to sync and the sentinels to find each other", func() bool {
		if !strings.Contains(info(ctx, g.Replica.Addr), "master_link_status:up") {
			return false
		}
		for _, a := range g.Addrs {
			c := redis.NewSentinelClient(&redis.Options{Addr: a, MaxRetries: -1})
			reps, err1 := c.Replicas(ctx, g.Master).Result()
			sens, err2 := c.Sentinels(ctx, g.Master).Result()
			c.Close()
			if err1 != nil || err2 != nil || len(reps) != 1 || len(sens) != n-1 {
				return false
			}
		}
		return true
	})
}

// KillPrimary kills the primary (SIGKILL, as a crash would) and waits
// (up to 60 s) until every sentinel names the replica as the master and
// the replica answers as one.
func (g *Sentinels) KillPrimary() {
	g.t.Helper()
	g.Primary.Kill()
	ctx := context.Background()
	g.poll(60*time.Second, "the sentinels to promote the replica", func() bool {
		for _, a := range g.Addrs {
			c := redis.NewSentinelClient(&redis.Options{Addr: a, MaxRetries: -1})
			addr, err := c.GetMasterAddrByName(ctx, g.Master).Result()
			c.Close()
			if err != nil || len(addr) != 2 || net.JoinHostPort(addr[0], addr[1]) != g.Replica.Addr {
				return false
			}
		}
		return strings.Contains(info(ctx, g.Replica.Addr), "role:master")
	})
}

func (g *Sentinels) poll(limit time.Duration, what string, ok func() bool) {
	g.t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			g.t.Fatalf("redistest: waited %v for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// info is addr's INFO replication, or "" when it does not answer.
func info(ctx context.Context, addr string) string {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	s, _ := c.Info(ctx, "replication").Result()
	return s
}
