package usagelog

import (
	"context"
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
