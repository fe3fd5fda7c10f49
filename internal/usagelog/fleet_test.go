package usagelog

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchboard/internal/store/redistest"
)

// waitCount polls db until it holds want rows.
func waitCount(t *testing.T, db *DB, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := db.Count(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == want {
			return
		}
		if n > want || time.Now().After(deadline) {
			t.Fatalf("%s holds %d rows, want %d", db.Path(), n, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFleetEveryReplicaSeesEveryRow: three replicas on one real Redis each
// record their own rows; every replica's file ends with all of them, each
// once, and a replica restarted on its file does not take any twice.
func TestFleetEveryReplicaSeesEveryRow(t *testing.T) {
	rs := redistest.Start(t)
	dir := t.TempDir()
	type replica struct {
		db    *DB
		fleet *Fleet
		log   *Log
		c     *redis.Client
	}
	start := func(i int) *replica {
		opts, err := redis.ParseURL(rs.URL)
		if err != nil {
			t.Fatal(err)
		}
		opts.ContextTimeoutEnabled = true // Close cancels a blocked read, as with queue.Dial
		c := redis.NewClient(opts)
		db, err := Open(filepath.Join(dir, fmt.Sprintf("r%d.db", i)))
		if err != nil {
			t.Fatal(err)
		}
		f, err := NewFleet(context.Background(), c, db, FleetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return &replica{db: db, fleet: f, log: NewLog(db, Options{Fleet: f}), c: c}
	}
	stop := func(r *replica) {
		r.log.Close()
		r.fleet.Close()
		r.db.Close()
		r.c.Close()
	}
	rs3 := []*replica{start(0), start(1), start(2)}
	defer func() {
		for _, r := range rs3 {
			stop(r)
		}
	}()
	for i := range 300 {
		r := rs3[i%3]
		r.log.Record(row(i, t0.Add(time.Duration(i)*time.Second), []string{"acme", "beta"}[i%2], "m", int64(i)))
	}
	for _, r := range rs3 {
		if err := r.log.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rs3 {
		waitCount(t, r.db, 300)
		g, err := r.db.Summarize(context.Background(), Filter{}, nil)
		if err != nil || g[0].CostNano != 299*300/2 {
			t.Fatalf("%s: %v %v", r.db.Path(), g, err)
		}
	}
	// Restart replica 1 on its file: same origin, same position.
	origin := rs3[1].fleet.Origin()
	stop(rs3[1])
	rs3[1] = start(1)
	if rs3[1].fleet.Origin() != origin {
		t.Fatal("a restarted replica changed its origin")
	}
	rs3[0].log.Record(row(1000, t0, "acme", "m", 5))
	if err := rs3[0].log.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs3 {
		waitCount(t, r.db, 301)
	}
	// A new replica takes what the stream holds.
	late := start(3)
	defer stop(late)
	waitCount(t, late.db, 301)
}

// TestFleetDecodesOlderRows: a row a replica of an older version put on
// the stream (no served_model) drains fine beside a newer one, whose
// served_model arrives intact.
func TestFleetDecodesOlderRows(t *testing.T) {
	rs := redistest.Start(t)
	opts, err := redis.ParseURL(rs.URL)
	if err != nil {
		t.Fatal(err)
	}
	opts.ContextTimeoutEnabled = true
	c := redis.NewClient(opts)
	defer c.Close()
	ctx := context.Background()
	older := `{"id":3,"time":"2026-01-02T03:04:05Z","request_id":"req_old","tenant":"acme","key_id":"cfg-acme","model":"small",` +
		`"provider":"p","provider_model":"pm","endpoint":"chat/completions","status":200,"attempts":1,"prompt_tokens":1,` +
		`"completion_tokens":2,"cost_nano_usd":7,"held_nano_usd":0,"unpriced":false,"ttft_ms":null,"duration_ms":3,"stream":false,"cost_usd":7e-9}`
	newer := row(1, t0, "acme", "small", 11)
	newer.ServedModel = "big"
	b, err := json.Marshal(newer)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{older, string(b)} {
		if err := c.XAdd(ctx, &redis.XAddArgs{Stream: StreamKey, Values: []any{"o", "another-replica", "r", r}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	db, err := Open(filepath.Join(t.TempDir(), DefaultFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, err := NewFleet(ctx, c, db, FleetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	waitCount(t, db, 2)
	rows, _, err := db.List(ctx, Filter{}, 0, 10)
	if err != nil || len(rows) != 2 {
		t.Fatalf("%+v %v", rows, err)
	}
	if rows[0].ServedModel != "big" || rows[0].Model != "small" || rows[1].RequestID != "req_old" || rows[1].ServedModel != "" || rows[1].CostNano != 7 {
		t.Fatalf("drained %+v", rows)
	}
}
