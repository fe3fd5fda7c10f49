// Package deploy tests the deployment files beside it and at the repo
// root: the Dockerfile (built and run with podman), compose.yaml (a fleet
// run with podman-compose), the Prometheus rules (promtool), the Grafana
// dashboard and the Kubernetes manifests (against the gateway's real
// metrics and config).
//
// The container tests (image_test.go, compose_test.go) build with the tag
// containers: ./scripts/test runs them as a step of their own, after the
// rest of the suite, so image builds do not compete with timing-sensitive
// tests for the CPU. Tests that need podman, podman-compose, promtool or
// redis-server skip with a message when they are missing (./scripts/test
// installs them with apt-get when it runs as root); under CI=true they
// fail instead, so CI cannot pass by skipping.
package deploy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// root is the repository root (this package lives in deploy/).
var root = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Dir(wd)
}()

// unavailable skips, or fails under CI.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set, so this test must run: %s", msg)
	}
	t.Skipf("skipping: %s (run ./scripts/test as root on Debian to install it)", msg)
}

// cleanups run at the end of the package's tests (TestMain): what the
// tests share (a built binary, images) is removed once.
var (
	cleanupMu sync.Mutex
	cleanups  []func()
)

func atExit(f func()) {
	cleanupMu.Lock()
	defer cleanupMu.Unlock()
	cleanups = append(cleanups, f)
}

func TestMain(m *testing.M) {
	code := m.Run()
	cleanupMu.Lock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	cleanupMu.Unlock()
	os.Exit(code)
}

// freePort is a loopback port nobody listens on right now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// readAll reads r to a string, bounded.
func readAll(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 1<<20))
	return string(b)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// waitHealthy polls url until it answers 200 (a container's start is an
// external process: there is no clock to inject).
func waitHealthy(t testing.TB, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not answer 200 within 60 s: %v", url, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
