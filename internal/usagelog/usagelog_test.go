package usagelog

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"switchboard/internal/clock"
)

var t0 = time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)

func counter(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}

func openTemp(t *testing.T) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), DefaultFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func row(i int, at time.Time, tenant, model string, cost int64) Row {
	return Row{Time: at, RequestID: fmt.Sprintf("req_%d", i), Tenant: tenant, KeyID: "cfg-" + tenant, Model: model,
		Provider: "p-" + model, ProviderModel: model + "-v1", Endpoint: "chat/completions", Status: 200, Attempts: 1,
		PromptTokens: 10, CompletionTokens: 5, CostNano: cost, DurationMs: 12}
}

// TestLogWritesInBatches: rows recorded in a burst are all written, in
// fewer transactions than rows, and read back field for field.
func TestLogWritesInBatches(t *testing.T) {
	db := openTemp(t)
	reg := prometheus.NewRegistry()
	l := NewLog(db, Options{Registerer: reg})
	defer l.Close()
	ttft := int64(42)
	want := row(1, t0, "acme", "m", 123456789)
	want.TTFTMs, want.Stream, want.HeldNano = &ttft, true, 7
	l.Record(want)
	for i := 2; i <= 2000; i++ {
		l.Record(row(i, t0.Add(time.Duration(i)*time.Millisecond), "acme", "m", 1))
	}
	ctx := context.Background()
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := db.Count(ctx); n != 2000 {
		t.Fatalf("%d rows, want 2000", n)
	}
	if w := counter(l.rows.WithLabelValues("written")); w != 2000 {
		t.Fatalf("written counter %v", w)
	}
	rows, _, err := db.List(ctx, Filter{Tenant: "acme", From: t0, To: t0.Add(time.Millisecond)}, 0, 10)
	if err != nil || len(rows) != 1 {
		t.Fatalf("%v %v", rows, err)
	}
	got := rows[0]
	if got.ID == 0 || got.TTFTMs == nil || *got.TTFTMs != 42 || !got.Stream || got.HeldNano != 7 || got.CostNano != 123456789 ||
		!got.Time.Equal(t0) || got.RequestID != "req_1" || got.ProviderModel != "m-v1" || got.KeyID != "cfg-acme" {
		t.Fatalf("read back %+v", got)
	}
}

// TestLogDropsWhenFull: a full queue drops (and counts) rows instead of
// making the caller wait.
func TestLogDropsWhenFull(t *testing.T) {
	db := openTemp(t)
	l := &Log{db: db, clk: clock.Real{}, ch: make(chan Row, 2), rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x"}, []string{"outcome"})}
	// No writer runs: the queue fills.
	if !l.Record(row(1, t0, "a", "m", 1)) || !l.Record(row(2, t0, "a", "m", 1)) {
		t.Fatal("a queue with room refused a row")
	}
	done := make(chan bool)
	go func() { done <- l.Record(row(3, t0, "a", "m", 1)) }()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("a full queue took a row")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Record waited on a full queue")
	}
	if d := counter(l.rows.WithLabelValues("dropped")); d != 1 {
		t.Fatalf("dropped counter %v", d)
	}
}

// TestRetentionPrunes: with the clock past a row's retention, the
// periodic prune deletes it and keeps younger rows.
func TestRetentionPrunes(t *testing.T) {
	db := openTemp(t)
	clk := clock.NewFake(t0)
	l := NewLog(db, Options{Clock: clk, Retention: 24 * time.Hour})
	defer l.Close()
	for i := range 2500 { // more than one prune batch
		l.Record(row(i, t0.Add(-48*time.Hour), "old", "m", 1))
	}
	l.Record(row(9999, t0.Add(-time.Hour), "young", "m", 1))
	ctx := context.Background()
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for clk.Waiters() == 0 {
		time.Sleep(time.Millisecond) // the writer arms its prune timer
	}
	clk.Advance(pruneEvery)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := db.Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows left after the prune, want the young one", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	g, err := db.Summarize(ctx, Filter{}, []string{"tenant"})
	if err != nil || len(g) != 1 || g[0].Keys["tenant"] != "young" {
		t.Fatalf("%v %v", g, err)
	}
}

// TestSummarizeAndList: sums by each dimension and by two, filters, and a
// cursor that walks every row once, newest first.
func TestSummarizeAndList(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	var rows []Row
	for i := range 30 {
		r := row(i, t0.Add(time.Duration(i)*time.Hour), []string{"acme", "beta"}[i%2], []string{"m1", "m2", "m3"}[i%3], int64(i+1))
		if i%10 == 9 {
			r.Status = 429
		}
		rows = append(rows, r)
	}
	if err := db.Insert(ctx, rows...); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		f      Filter
		dims   []string
		groups int
		top    map[string]string
		cost   int64
	}{
		{"total", Filter{}, nil, 1, map[string]string{}, 465},
		{"tenant", Filter{}, []string{"tenant"}, 2, map[string]string{"tenant": "beta"}, 240},
		{"model", Filter{}, []string{"model"}, 3, map[string]string{"model": "m3"}, 165},
		{"day", Filter{}, []string{"day"}, 2, map[string]string{"day": "2026-03-02"}, 360},
		{"tenant+model", Filter{}, []string{"tenant", "model"}, 6, map[string]string{"tenant": "beta", "model": "m3"}, 6 + 12 + 18 + 24 + 30},
		{"filtered", Filter{Tenant: "acme", Model: "m1"}, []string{"key"}, 1, map[string]string{"key": "cfg-acme"}, 1 + 7 + 13 + 19 + 25},
		{"status", Filter{StatusClass: 4}, []string{"status"}, 1, map[string]string{"status": "429"}, 10 + 20 + 30},
		{"window", Filter{From: t0.Add(10 * time.Hour), To: t0.Add(12 * time.Hour)}, nil, 1, map[string]string{}, 11 + 12},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := db.Summarize(ctx, tc.f, tc.dims)
			if err != nil {
				t.Fatal(err)
			}
			if len(g) != tc.groups {
				t.Fatalf("%d groups, want %d: %v", len(g), tc.groups, g)
			}
			for k, v := range tc.top {
				if g[0].Keys[k] != v {
					t.Fatalf("top group %v, want %s=%s", g[0].Keys, k, v)
				}
			}
			if g[0].CostNano != tc.cost {
				t.Fatalf("top cost %d, want %d", g[0].CostNano, tc.cost)
			}
		})
	}

	seen := map[string]bool{}
	var cursor int64
	var last int64 = 1 << 62
	for page := 0; ; page++ {
		got, next, err := db.List(ctx, Filter{}, cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			if seen[r.RequestID] || r.ID >= last {
				t.Fatalf("page %d: %s repeated or out of order", page, r.RequestID)
			}
			seen[r.RequestID], last = true, r.ID
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	if len(seen) != 30 {
		t.Fatalf("the cursor walked %d rows, want 30", len(seen))
	}
}

// TestOpenUpgradesOlderSchemas: a file written before the unpriced or
// the served_model column existed is upgraded when opened, its rows kept
// (an old row's served_model reads as "", unknown), and the new columns
// are written, filtered and grouped by.
func TestOpenUpgradesOlderSchemas(t *testing.T) {
	const (
		unpricedCol = ",\n\tunpriced          INTEGER NOT NULL DEFAULT 0"
		servedCol   = ",\n\tserved_model      TEXT NOT NULL DEFAULT ''"
		tagsCol     = ",\n\ttags              TEXT"
	)
	tests := []struct {
		name string
		drop []string // columns the older version lacked
	}{
		{"first version", []string{tagsCol, servedCol, unpricedCol}},
		{"before served_model", []string{tagsCol, servedCol}},
		{"before tags", []string{tagsCol}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), DefaultFile)
			old, err := sql.Open("sqlite", dsn(path, false))
			if err != nil {
				t.Fatal(err)
			}
			older := schema
			for _, col := range tt.drop {
				before := older
				older = strings.Replace(older, col, "", 1)
				if older == before {
					t.Fatalf("the test no longer finds %q in the schema", col)
				}
			}
			if _, err := old.Exec(older); err != nil {
				t.Fatal(err)
			}
			if _, err := old.Exec(`INSERT INTO usage_log (ts_ms, request_id, tenant, key_id, model, provider, provider_model, endpoint,
				status, attempts, prompt_tokens, completion_tokens, cost_nano, held_nano, duration_ms, stream)
				VALUES (1, 'r', 't', 'k', 'm', 'p', 'pm', 'e', 200, 1, 1, 1, 5, 0, 1, 0)`); err != nil {
				t.Fatal(err)
			}
			old.Close()
			// The CLI may read it before any newer gateway upgraded it.
			ro, err := OpenReadOnly(path)
			if err != nil {
				t.Fatal(err)
			}
			rows, _, err := ro.List(context.Background(), Filter{}, 0, 10)
			g, gerr := ro.Summarize(context.Background(), Filter{ServedModel: "big"}, []string{"served_model"})
			ro.Close()
			if err != nil || len(rows) != 1 || rows[0].RequestID != "r" || rows[0].ServedModel != "" || rows[0].Unpriced {
				t.Fatalf("read-only before the upgrade: %+v %v", rows, err)
			}
			if gerr != nil || len(g) != 0 {
				t.Fatalf("read-only served_model group: %+v %v", g, gerr)
			}
			db, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ctx := context.Background()
			if err := db.Insert(ctx, Row{Time: t0, RequestID: "new", Model: "m", ServedModel: "big", Unpriced: true}); err != nil {
				t.Fatal(err)
			}
			g, err = db.Summarize(ctx, Filter{}, nil)
			if err != nil || g[0].Requests != 2 || g[0].Unpriced != 1 || g[0].CostNano != 5 {
				t.Fatalf("%+v %v", g, err)
			}
			rows, _, err = db.List(ctx, Filter{}, 0, 10)
			if err != nil || len(rows) != 2 || rows[0].ServedModel != "big" || rows[1].RequestID != "r" || rows[1].ServedModel != "" {
				t.Fatalf("rows %+v %v", rows, err)
			}
			if rows, _, err := db.List(ctx, Filter{ServedModel: "big"}, 0, 10); err != nil || len(rows) != 1 || rows[0].RequestID != "new" {
				t.Fatalf("served_model filter: %+v %v", rows, err)
			}
			g, err = db.Summarize(ctx, Filter{Model: "m"}, []string{"model", "served_model"})
			if err != nil || len(g) != 2 || g[0].Keys["served_model"] == g[1].Keys["served_model"] {
				t.Fatalf("grouped by served_model: %+v %v", g, err)
			}
			// Read-only (the CLI) reads an upgraded file too.
			ro, err = OpenReadOnly(path)
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			if rows, _, err := ro.List(ctx, Filter{}, 0, 10); err != nil || len(rows) != 2 {
				t.Fatalf("read-only: %+v %v", rows, err)
			}
		})
	}
}
