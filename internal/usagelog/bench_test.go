package usagelog

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkInsert is the writer's cost per row, in batches as a burst
// forms them.
func BenchmarkInsert(b *testing.B) {
	db, err := Open(filepath.Join(b.TempDir(), DefaultFile))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	batch := make([]Row, maxBatch)
	for i := range batch {
		batch[i] = row(i, t0.Add(time.Duration(i)*time.Millisecond), "acme", "m", 12345)
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i += maxBatch {
		if err := db.insert(ctx, batch, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSummarizeByTenant is the query /dashboard and /admin rank
// tenants by when there are more than they list: 24 h of 100,000 rows
// over 10,000 tenants, summed by tenant.
func BenchmarkSummarizeByTenant(b *testing.B) {
	db, err := Open(filepath.Join(b.TempDir(), DefaultFile))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	batch := make([]Row, 0, maxBatch)
	for i := range 100_000 {
		batch = append(batch, row(i, t0.Add(time.Duration(i)*800*time.Millisecond), fmt.Sprintf("t%05d", i%10_000), "m", int64(i)))
		if len(batch) == maxBatch {
			if err := db.insert(ctx, batch, nil); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := db.insert(ctx, batch, nil); err != nil {
		b.Fatal(err)
	}
	f := Filter{From: t0, To: t0.Add(24 * time.Hour)}
	b.ResetTimer()
	for b.Loop() {
		gs, err := db.Summarize(ctx, f, []string{"tenant"})
		if err != nil || len(gs) != 10_000 {
			b.Fatalf("%d groups, %v", len(gs), err)
		}
	}
}
