package usagelog

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A cache hit's row keeps cache_hit and saved_usd through the file, the
// sums and every export.
func TestCacheHitRows(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	hit := row(1, at, "acme", "m", 0)
	hit.CacheHit, hit.SavedNano, hit.Attempts, hit.PromptTokens, hit.CompletionTokens = true, 2_500_000, 0, 0, 0
	if err := db.Insert(ctx, row(0, at, "acme", "m", 2_500_000), hit); err != nil {
		t.Fatal(err)
	}
	rows, _, err := db.List(ctx, Filter{}, 0, 10)
	if err != nil || len(rows) != 2 || !rows[0].CacheHit || rows[0].SavedNano != 2_500_000 || rows[1].CacheHit {
		t.Fatalf("%+v %v", rows, err)
	}
	b, _ := json.Marshal(rows[0])
	if !strings.Contains(string(b), `"cache_hit":true`) || !strings.Contains(string(b), `"saved_usd":0.0025`) ||
		!strings.Contains(string(b), `"cost_usd":0`) {
		t.Fatalf("json row: %s", b)
	}
	g, err := db.Summarize(ctx, Filter{}, []string{"tenant"})
	if err != nil || len(g) != 1 || g[0].Requests != 2 || g[0].CacheHits != 1 || g[0].SavedNano != 2_500_000 || g[0].CostNano != 2_500_000 {
		t.Fatalf("%+v %v", g, err)
	}
	gb, _ := json.Marshal(g[0])
	if !strings.Contains(string(gb), `"cache_hits":1`) || !strings.Contains(string(gb), `"saved_usd":0.0025`) {
		t.Fatalf("json group: %s", gb)
	}
	var csv bytes.Buffer
	w := NewRowWriter(&csv, FormatCSV)
	_ = w.Write(rows[0])
	_ = w.Close()
	lines := strings.Split(strings.TrimSpace(csv.String()), "\n")
	if !strings.HasSuffix(lines[0], ",cache_hit,saved_nano_usd,tags") || !strings.HasSuffix(lines[1], ",true,2500000,") {
		t.Fatalf("csv: %q", csv.String())
	}
}
