package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"

	"switchboard/internal/store"
	"switchboard/internal/store/redistest"
)

// TestMain lets a test start this binary as the real gateway process:
// with SWITCHBOARD_TEST_SERVE=1 it runs the command line it was given.
func TestMain(m *testing.M) {
	if os.Getenv("SWITCHBOARD_TEST_SERVE") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// gatewayProc is the gateway running as its own process.
type gatewayProc struct {
	cmd  *exec.Cmd
	addr string
	out  *bytes.Buffer
}

func startGateway(t *testing.T, cfg string) *gatewayProc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	g := &gatewayProc{addr: addr, out: &bytes.Buffer{}}
	g.cmd = exec.Command(self, "serve", "--config", cfg, "--listen", addr)
	g.cmd.Env = append(os.Environ(), "SWITCHBOARD_TEST_SERVE=1")
	g.cmd.Stdout, g.cmd.Stderr = g.out, g.out
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.cmd.Process.Kill(); _ = g.cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return g
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("gateway not healthy in 20 s:\n%s", g.out.String())
	return nil
}

// killMidBurst sends SIGKILL once done reaches n (or after 20 s), then
// stops the burst (stop) and waits for its goroutines (wg).
func (g *gatewayProc) killMidBurst(t *testing.T, done *atomic.Int64, n int64, stop func(), wg *sync.WaitGroup) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for done.Load() < n && time.Now().Before(deadline) && !t.Failed() {
		time.Sleep(2 * time.Millisecond)
	}
	if err := g.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = g.cmd.Wait()
	stop()
	wg.Wait()
}

// crashRig is a metered gateway process and its upstream, for a burst
// cut by SIGKILL.
type crashRig struct {
	dir, cfg string
	sent     atomic.Int64
}

const (
	crashKey = "sk-crash-test-tenant"
	// crashCost: input 1 USD and output 2 USD per million, an answer of
	// 10 + 5 tokens costs 20,000 nano-USD.
	crashCost = 20_000
)

// newCrashRig writes the config of a gateway whose key is a tenant with a
// budget, over an upstream that counts what reaches it; store is the
// config's store section.
func newCrashRig(t *testing.T, store string) *crashRig {
	rig := &crashRig{dir: t.TempDir()}
	const answer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"up-model",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rig.sent.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(time.Millisecond) // a few requests are always in flight
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(up.Close)
	keys, _ := json.Marshal(map[string]any{crashKey: map[string]any{"tenant": "acme", "rpm": 1_000_000, "tpm": 1_000_000_000,
		"daily_requests": 1_000_000, "budget_usd": 1000}})
	if err := os.WriteFile(filepath.Join(rig.dir, "keys.json"), keys, 0o600); err != nil {
		t.Fatal(err)
	}
	rig.cfg = filepath.Join(rig.dir, "c.yaml")
	if err := os.WriteFile(rig.cfg, []byte(fmt.Sprintf(`providers:
  up:
    type: openai
    base_url: %s/v1
    api_key: sk-up
models:
  - name: m
    providers: [{provider: up, model: up-model}]
pricing:
  up:
    up-model: {input: 1, output: 2, context: 8192, max_output: 1024}
auth:
  keys_file: %s
logging:
  level: warn
`, up.URL, filepath.Join(rig.dir, "keys.json"))+store), 0o600); err != nil {
		t.Fatal(err)
	}
	return rig
}

// burst sends budgeted requests from 32 clients until the gateway is
// killed, once 300 are answered; it returns how many were answered and
// how many reached the upstream.
func (rig *crashRig) burst(t *testing.T, g *gatewayProc) (answered, sent int64) {
	body := []byte(`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hello"}]}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	var n atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+g.addr+"/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+crashKey)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					continue // the kill cuts requests in flight
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode == 200 {
					n.Add(1)
				} else if err == nil {
					t.Errorf("status %d: %s", resp.StatusCode, b)
					return
				}
			}
		}()
	}
	// Kill once the burst is well under way.
	g.killMidBurst(t, &n, 300, stop, &wg)
	time.Sleep(20 * time.Millisecond) // upstream handlers counted at arrival; let stragglers finish
	if n.Load() < 300 {
		t.Fatalf("only %d requests answered before the kill:\n%s", n.Load(), g.out.String())
	}
	return n.Load(), rig.sent.Load()
}

// checkRestart reads the ledger through a restarted gateway: every
// request that reached the provider is counted, every answered one's cost
// is settled or held.
func checkRestart(t *testing.T, g *gatewayProc, answered, sent int64) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+g.addr+"/v1/usage", nil)
	req.Header.Set("Authorization", "Bearer "+crashKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var u struct {
		RequestsToday int64 `json:"requests_today"`
		Spend         struct {
			Reserved int64 `json:"reserved_nano_usd"`
			Settled  int64 `json:"settled_nano_usd"`
		} `json:"spend"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&u); err != nil || resp.StatusCode != 200 {
		t.Fatalf("usage: %d %v", resp.StatusCode, err)
	}
	if u.RequestsToday < sent {
		t.Errorf("after restart: %d requests today, but %d reached the provider", u.RequestsToday, sent)
	}
	if spent := u.Spend.Reserved + u.Spend.Settled; spent < answered*crashCost {
		t.Errorf("after restart: %d nano-USD reserved + settled, less than the %d answered requests cost (%d)",
			spent, answered, answered*crashCost)
	}
	// Settlements applied at most once: what is settled is no more than
	// what the requests that reached the provider cost.
	if u.Spend.Settled > sent*crashCost {
		t.Errorf("after restart: %d nano-USD settled, more than the %d requests sent cost: a settlement applied twice", u.Spend.Settled, sent)
	}
}

// A gateway process killed with SIGKILL in the middle of a burst of
// metered requests loses no debit: after it is restarted on the same
// SQLite file, every request that reached the provider (and so every
// request that was answered) is counted in the ledger's day, and every
// answered request's cost is in the budget window (settled, or still
// held by a live hold the kill left). Group commit releases a caller
// only once its admission is committed; this is what would catch an
// admission acknowledged before it was durable. Settled attempts leave
// no record: the file holds only the live holds of the requests the kill
// cut, bounded by the burst's concurrency.
func TestSIGKILLDuringBurstLosesNoDebit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway as a process")
	}
	db := filepath.Join(t.TempDir(), "ledger.db")
	rig := newCrashRig(t, "store:\n  backend: sqlite\n  path: "+db+"\n")
	nAnswered, nSent := rig.burst(t, startGateway(t, rig.cfg))

	// The file as the killed process left it: its tables plus the
	// journal of what changed since the last checkpoint, which opening
	// the store replays into them.
	st, err := store.OpenSQLite(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	conn, err := sql.Open("sqlite", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	var holds, counted int64
	if err := conn.QueryRow(`SELECT COUNT(*) FROM holds WHERE tenant = 'acme'`).Scan(&holds); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(`SELECT COALESCE(SUM(requests), 0) FROM usage_minutes WHERE tenant = 'acme'`).Scan(&counted); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	t.Logf("answered %d, sent upstream %d, counted %d, live holds left by the kill %d", nAnswered, nSent, counted, holds)
	if counted < nSent {
		t.Errorf("the ledger lost debits: %d requests reached the provider (%d answered) but the file counts %d",
			nSent, nAnswered, counted)
	}
	if holds > 32 {
		t.Errorf("%d live holds after the kill, more than the burst's 32 requests in flight: settled attempts kept records", holds)
	}
	checkRestart(t, startGateway(t, rig.cfg), nAnswered, nSent)
}

// The same through Redis: a replica killed mid-burst leaves the fleet's
// ledger whole (each decision and each settlement is one script), with
// no more live holds than requests in flight, and a replica started
// after it reads the same counts.
func TestSIGKILLDuringBurstRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway as a process")
	}
	srv := redistest.Start(t)
	rig := newCrashRig(t, "redis:\n  url: "+srv.URL+"\n  command_timeout: 10s\n")
	nAnswered, nSent := rig.burst(t, startGateway(t, rig.cfg))

	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rc.Close()
	bg := context.Background()
	counted, _ := rc.HGet(bg, "switchboard:d:{t:acme}", "R").Int64()
	holds := rc.ZCard(bg, "switchboard:holds:{t:acme}").Val()
	t.Logf("answered %d, sent upstream %d, counted %d, live holds left by the kill %d", nAnswered, nSent, counted, holds)
	if counted < nSent {
		t.Errorf("the fleet's ledger lost debits: %d requests reached the provider but Redis counts %d", nSent, counted)
	}
	if holds > 32 {
		t.Errorf("%d live holds after the kill, more than the burst's 32 requests in flight", holds)
	}
	if keys := rc.Keys(bg, "switchboard:a:*").Val(); len(keys) != 0 {
		t.Errorf("%d per-attempt records in Redis", len(keys))
	}
	checkRestart(t, startGateway(t, rig.cfg), nAnswered, nSent)
}
