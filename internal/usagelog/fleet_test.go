package usagelog

import (
	"context"
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
