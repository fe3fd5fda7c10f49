// Package redistest runs a throwaway redis-server for tests: its own
// process on a free loopback port, no persistence, in a temporary
// directory, killed when the test ends.
//
// When redis-server is missing or cannot start, the test is skipped with a
// message saying so; when the environment variable CI is set it fails
// instead, so a CI machine without Redis cannot pass the fleet tests by
// skipping them.
package redistest

import (
	"bufio"
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

// Server is one redis-server process.
type Server struct {
	// Addr is host:port; URL is redis://Addr/0.
	Addr, URL string
	Port      int

	t   testing.TB
	bin string
	dir string
	// extra are further server arguments (cluster mode); confFirst a
	// config file given before every argument (sentinel mode).
	extra     []string
	confFirst string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// unavailable skips, or fails under CI.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set, so tests that need Redis must run: %s", msg)
	}
	t.Skipf("skipping: %s (install Debian's redis-server, or run ./scripts/test as root to install it)", msg)
}

// Start runs a redis-server for the test and stops it at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/redis-server"); serr != nil {
			unavailable(t, "redis-server is not installed")
		}
		bin = "/usr/bin/redis-server"
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	t.Cleanup(s.Kill)
	if err := s.startOnFreePort(); err != nil {
		unavailable(t, "redis-server did not start: %v", err)
		return nil
	}
	return s
}

// startOnFreePort starts s on a free loopback port. A free port can be
// taken between probing and binding: it tries a few.
func (s *Server) startOnFreePort() error {
	var last error
	for range 3 {
		port, err := freePort()
		if err != nil {
			last = err
			continue
		}
		s.Port, s.Addr = port, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.URL = "redis://" + s.Addr + "/0"
		if last = s.start(); last == nil {
			return nil
		}
	}
	return last
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start launches the process on s.Port and waits until it answers PING.
func (s *Server) start() error {
	logPath := filepath.Join(s.dir, "redis.log")
	args := []string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", logPath, "--daemonize", "no"}
	args = append(args, s.extra...)
	if s.confFirst != "" {
		// A sentinel rewrites its config file and keeps no data: only
		// the port and the log apply.
		args = append([]string{s.confFirst, "--port", strconv.Itoa(s.Port), "--logfile", logPath}, s.extra...)
	}
	cmd := exec.Command(s.bin, args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("exited (%v): %s", err, lastLines(string(b), 3))
		default:
		}
		if ping(s.Addr) {
			s.mu.Lock()
			s.cmd = cmd
			s.mu.Unlock()
			// Reap the process whenever it ends, so Kill never blocks on a
			// second Wait.
			go func() { <-exited }()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("no answer on %s within 10s", s.Addr)
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " | ")
}

// ping speaks just enough RESP to see the server is up.
func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// running reports whether the server was started and not killed.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Kill stops the server at once (SIGKILL, as a crash would) and waits
// until its port refuses connections.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Kill()
	for range 250 {
		c, err := net.DialTimeout("tcp", s.Addr, 100*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(20 * time.Millisecond)
	}
}

// Restart starts a fresh, empty server on the same port after Kill.
func (s *Server) Restart() {
	s.t.Helper()
	var err error
	// The old socket may linger for a moment; retry briefly.
	for range 50 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("redis-server did not restart on %s: %v", s.Addr, err)
}
