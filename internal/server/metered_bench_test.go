package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"switchboard/internal/admit"
	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/store"
	"switchboard/internal/usagelog"
)

// BenchmarkMeteredHandler is BenchmarkUnaryHandler's request as a paying
// tenant sends it: a tenant key from a keys file with RPM, TPM, a daily
// count and a USD budget, a priced model, so that every request takes an
// admission and a settlement; on the memory store and on SQLite, beside
// the same gateway unmetered (the anonymous token). What metering costs in
// CPU and allocations per request, outside the network.
func BenchmarkMeteredHandler(b *testing.B) {
	rt := cannedRT{body: []byte(benchAnswer)}
	// The bench harness's request (bench/loadgen.go): four messages, about 1 KB.
	body := `{"model":"bench-model","messages":[{"role":"system","content":"You are a careful assistant for a logistics company. ` +
		`Answer in plain English, cite the shipment id when you mention one, never invent tracking numbers, and keep answers under ` +
		`one hundred words unless asked for more detail."},{"role":"user","content":"Shipment SHP-20931 left Rotterdam on Monday and ` +
		`was due in Hamburg on Wednesday. The tracking page has shown 'in transit' since Tuesday evening. What are the usual causes ` +
		`of such a delay on this route, and what should I ask the carrier when I call them?"},{"role":"assistant","content":"Common ` +
		`causes are port congestion, customs holds, and missed rail connections. Ask the carrier for the last scan location, whether ` +
		`a customs hold is recorded, and the new estimated arrival."},{"role":"user","content":"Thanks. Draft a short, polite message ` +
		`to the carrier asking exactly that."}],"temperature":0.2,"top_p":1,"user":"bench-user-0001","max_tokens":64,"stream":false}`
	dir := b.TempDir()
	keys, _ := json.Marshal(map[string]any{"sk-tenant-bench": map[string]any{
		"tenant": "bench", "rpm": 1_000_000_000, "tpm": 1_000_000_000_000, "daily_requests": 1_000_000_000,
		"budget_usd": 1_000_000, "budget_window_secs": 86400}})
	if err := os.WriteFile(filepath.Join(dir, "keys.json"), keys, 0o600); err != nil {
		b.Fatal(err)
	}
	cfgText := benchRoute + `pricing:
  up:
    up-model: {input: 1, output: 2, context: 131072, max_output: 4096}
auth:
  token: tok
  keys_file: ` + filepath.Join(dir, "keys.json") + `
logging:
  level: warn
`
	for _, tc := range []struct{ name, token, store string }{
		{"unmetered", "tok", "memory"}, {"metered-memory", "sk-tenant-bench", "memory"}, {"metered-sqlite", "sk-tenant-bench", "sqlite"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "c.yaml")
			text := cfgText + "store:\n  backend: " + tc.store + "\n"
			if tc.store == "sqlite" {
				text += "  path: " + filepath.Join(b.TempDir(), "s.db") + "\n"
			}
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				b.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err != nil {
				b.Fatal(err)
			}
			st, err := store.Open(cfg, b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			s := New(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})), nil, &http.Client{Transport: rt})
			s.Admission = admit.New(st, clock.Real{}, s.Metrics.Registry)
			// The usage log is on, as serve runs it.
			db, err := usagelog.Open(filepath.Join(b.TempDir(), usagelog.DefaultFile))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			ul := usagelog.NewLog(db, usagelog.Options{Buffer: 1 << 20})
			defer ul.Close()
			s.SetUsageLog(ul)
			s.Apply(cfg)
			h := s.Handler()
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+tc.token)
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
