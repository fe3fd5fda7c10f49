package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
)

// The ledger mode is the long metered run: one tenant key with a budget,
// every request budgeted, against a store (sqlite or redis), for a given
// number of requests (1,000,000 by default) at the default
// spend.max_retained_attempts (100,000). It checks what issue 24 asks of
// the ledger: not one refusal however many requests a window serves, live
// holds bounded by the requests in flight, memory flat; and at the end,
// that the ledger counted every request and settled each one's cost
// exactly, nothing left held. Every 10 s it samples the requests served
// and refused, the live holds (switchboard_spend_live_holds), the
// gateway's RSS and the store's own size (the SQLite file with its WAL,
// or Redis's used_memory).
//
//	bench ledger --gateway PATH --store sqlite|redis [--requests 1000000] [--clients 16] [--out DIR]

// ledgerSample is the run at one moment.
type ledgerSample struct {
	At        float64 `json:"at_s"`
	Served    int64   `json:"served"`
	Refused   int64   `json:"refused"`
	LiveHolds int64   `json:"live_holds"`
	RSSKB     int64   `json:"rss_kb"`
	StoreKB   int64   `json:"store_kb"` // SQLite file + WAL, or Redis used_memory
}

// LedgerReport is the result of a ledger run.
type LedgerReport struct {
	Started   time.Time      `json:"started"`
	Store     string         `json:"store"`
	Requests  int64          `json:"requests"`
	Clients   int            `json:"clients"`
	Seconds   float64        `json:"seconds"`
	Served    int64          `json:"served"`
	Refused   int64          `json:"refused"`
	Statuses  map[string]int `json:"refused_by_status"`
	Samples   []ledgerSample `json:"samples"`
	PeakHolds int64          `json:"peak_live_holds"`
	// What the ledger says at the end (GET /v1/usage): requests counted,
	// nano-USD settled and still held; and the cost the answers reported.
	Counted  int64  `json:"ledger_requests"`
	Settled  int64  `json:"ledger_settled_nano_usd"`
	Held     int64  `json:"ledger_held_nano_usd"`
	Expected int64  `json:"expected_settled_nano_usd"`
	Revision string `json:"revision,omitempty"`
}

const (
	ledgerToken = "bench-ledger-tenant"
	ledgerAdmin = "bench-ledger-admin"
	// ledgerCost is one request's cost at meteredConfig's prices: the
	// fake upstream's 212 prompt tokens at 1 USD and 36 completion tokens
	// at 2 USD per million.
	ledgerCost = 212*1_000 + 36*2_000
)

func ledgerMain(args []string) int {
	fs := flag.NewFlagSet("ledger", flag.ContinueOnError)
	gw := fs.String("gateway", "", "switchboard binary (required)")
	st := fs.String("store", meterSQLite, "store: sqlite or redis")
	n := fs.Int64("requests", 1_000_000, "budgeted requests to send")
	clients := fs.Int("clients", 16, "concurrent clients (closed loop)")
	out := fs.String("out", "bench/results", "directory for ledger-<store>-<time>.json and the logs")
	rev := fs.String("rev", "", "revision label for the report")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *gw == "" || (*st != meterSQLite && *st != meterRedis) {
		logf("bench ledger: --gateway and --store sqlite|redis are required")
		return 2
	}
	rep, err := Ledger(*gw, *st, *out, *n, *clients, os.Stderr)
	if err != nil {
		logf("bench ledger: %v", err)
		return 1
	}
	rep.Revision = *rev
	fmt.Print(rep.Markdown())
	if rep.Refused > 0 || rep.Counted != rep.Served || rep.Settled != rep.Expected || rep.Held != 0 {
		return 1
	}
	return 0
}

// Ledger runs the gateway binary gw on store st for n budgeted requests.
func Ledger(gw, st, out string, n int64, clients int, progress io.Writer) (*LedgerReport, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "ledger")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	up := &http.Server{Handler: upstream{}, ReadHeaderTimeout: 10 * time.Second, ErrorLog: quietLog()}
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() { _ = up.Serve(upLn) }()
	defer up.Close()

	keys, err := json.Marshal(map[string]any{
		ledgerToken: map[string]any{"tenant": "bench", "rpm": 1_000_000_000, "tpm": 1_000_000_000_000,
			"daily_requests": 1_000_000_000, "budget_usd": 1_000_000, "budget_window_secs": 86400},
		ledgerAdmin: map[string]any{"tenant": "ops", "role": "admin"},
	})
	if err != nil {
		return nil, err
	}
	keysFile := filepath.Join(tmp, "keys.json")
	if err := os.WriteFile(keysFile, keys, 0o600); err != nil {
		return nil, err
	}
	db := filepath.Join(tmp, "metered.db")
	redisAddr := ""
	var red *child
	if st == meterRedis {
		h := &harness{tmp: tmp, logDir: out}
		if red, err = h.startRedis(); err != nil {
			return nil, err
		}
		defer red.stop()
		redisAddr = red.addr
	}
	// The default spend.max_retained_attempts (100,000) stands: the run
	// is ten times that.
	cfg := filepath.Join(tmp, "gateway.yaml")
	if err := os.WriteFile(cfg, []byte(meteredConfig("http://"+upLn.Addr().String(), keysFile, db, st, redisAddr)+
		"usage_log:\n  enabled: false\n"), 0o600); err != nil {
		return nil, err
	}
	cmd, addr, err := serveGateway(gw, cfg, tmp, filepath.Join(out, "ledger-"+st+"-gateway.log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	base := "http://" + addr

	rep := &LedgerReport{Started: time.Now().UTC(), Store: st, Requests: n, Clients: clients, Statuses: map[string]int{}}
	var served, refused, sent atomic.Int64
	var mu sync.Mutex
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients * 2}, Timeout: 60 * time.Second}
	body := `{"model":"` + benchModel + `","max_tokens":64,"messages":[{"role":"user","content":"the ledger run"}]}`
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sent.Add(1) <= n {
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+ledgerToken)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				status := "transport"
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						served.Add(1)
						continue
					}
					status = strconv.Itoa(resp.StatusCode)
				}
				refused.Add(1)
				mu.Lock()
				rep.Statuses[status]++
				mu.Unlock()
			}
		}()
	}
	t0 := time.Now()
	sample := func() ledgerSample {
		s := ledgerSample{At: time.Since(t0).Seconds(), Served: served.Load(), Refused: refused.Load()}
		s.RSSKB, _, _ = procStatus(cmd.Process.Pid)
		s.LiveHolds = scrapeGaugeAs(base+"/metrics", "switchboard_spend_live_holds", ledgerAdmin)
		s.StoreKB = storeKB(st, db, redisAddr)
		return s
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(10 * time.Second)
loop:
	for {
		select {
		case <-tick.C:
			s := sample()
			rep.Samples = append(rep.Samples, s)
			rep.PeakHolds = max(rep.PeakHolds, s.LiveHolds)
			fmt.Fprintf(progress, "ledger %s: %+v\n", st, s)
		case <-done:
			break loop
		}
	}
	tick.Stop()
	rep.Seconds = time.Since(t0).Seconds()
	rep.Served, rep.Refused = served.Load(), refused.Load()
	// The settlements queued last are applied before a later read of the
	// same process: the usage read below sees them all.
	s := sample()
	rep.Samples = append(rep.Samples, s)
	rep.PeakHolds = max(rep.PeakHolds, s.LiveHolds)
	if err := ledgerTotals(base, rep); err != nil {
		return nil, err
	}
	rep.Expected = rep.Served * ledgerCost
	b, _ := json.MarshalIndent(rep, "", "  ")
	name := filepath.Join(out, "ledger-"+st+"-"+rep.Started.Format("20060102-150405")+".json")
	if err := os.WriteFile(name, b, 0o644); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "ledger: wrote %s\n", name)
	return rep, nil
}

// ledgerTotals reads the tenant's ledger through GET /v1/usage.
func ledgerTotals(base string, rep *LedgerReport) error {
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, base+"/v1/usage", nil)
	req.Header.Set("Authorization", "Bearer "+ledgerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		return fmt.Errorf("usage: %d %v %s", resp.StatusCode, err, b)
	}
	rep.Counted = gjson.GetBytes(b, "requests_today").Int()
	rep.Settled = gjson.GetBytes(b, "spend.settled_nano_usd").Int()
	rep.Held = gjson.GetBytes(b, "spend.reserved_nano_usd").Int()
	return nil
}

// storeKB is the store's size: the SQLite file and its WAL, or what
// Redis reports as used_memory.
func storeKB(st, db, redisAddr string) int64 {
	if st == meterSQLite {
		var kb int64
		for _, suf := range []string{"", "-wal"} {
			if fi, err := os.Stat(db + suf); err == nil {
				kb += fi.Size() / 1024
			}
		}
		return kb
	}
	conn, err := net.DialTimeout("tcp", redisAddr, time.Second)
	if err != nil {
		return -1
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(conn, "INFO memory\r\n"); err != nil {
		return -1
	}
	buf := make([]byte, 8192)
	got := 0
	for got < len(buf) {
		k, err := conn.Read(buf[got:])
		got += k
		if err != nil || strings.Contains(string(buf[:got]), "mem_allocator") {
			break
		}
	}
	for _, line := range strings.Split(string(buf[:got]), "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n / 1024
		}
	}
	return -1
}

// Markdown renders the report for BENCHMARKS.md.
func (r *LedgerReport) Markdown() string {
	var b strings.Builder
	storeCol := "SQLite file + WAL"
	if r.Store == meterRedis {
		storeCol = "Redis used_memory"
	}
	fmt.Fprintf(&b, "Ledger run %s, store %s%s: %d budgeted requests from %d clients in %.0f s (%.0f requests/s); "+
		"spend.max_retained_attempts at its default, 100,000.\n\n", r.Started.Format(time.RFC3339), r.Store, revNote(r.Revision),
		r.Requests, r.Clients, r.Seconds, float64(r.Served)/max(r.Seconds, 1))
	fmt.Fprintf(&b, "| at | served | refused | live holds | gateway RSS | %s |\n|---:|---:|---:|---:|---:|---:|\n", storeCol)
	for i, s := range r.Samples {
		// At most about 12 rows: every k-th sample, and the last.
		if k := max(len(r.Samples)/12, 1); i%k != 0 && i != len(r.Samples)-1 {
			continue
		}
		fmt.Fprintf(&b, "| %.0f s | %d | %d | %d | %.1f MiB | %.1f MiB |\n", s.At, s.Served, s.Refused, s.LiveHolds,
			float64(s.RSSKB)/1024, float64(s.StoreKB)/1024)
	}
	fmt.Fprintf(&b, "\nServed %d, refused %d %v; peak live holds %d. The ledger at the end: %d requests counted, "+
		"%d nano-USD settled (the answers' reported usage priced: %d), %d held.\n",
		r.Served, r.Refused, r.Statuses, r.PeakHolds, r.Counted, r.Settled, r.Expected, r.Held)
	return b.String()
}

func revNote(rev string) string {
	if rev == "" {
		return ""
	}
	return " (gateway at " + rev + ")"
}
