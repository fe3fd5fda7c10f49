package provider

import (
	"bytes"
	"context"
	"io"
	"testing"
)

// onlyReader hides bytes.Reader's WriterTo so reads come in small pieces.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p[:min(len(p), 7000)]) }

func TestReadUnaryWithinBudget(t *testing.T) {
	tests := []struct {
		name     string
		size     int
		declared bool
		budget   int64
		wantErr  bool
	}{
		{"small, declared", 100, true, 1 << 20, false},
		{"small, undeclared", 100, false, 1 << 20, false},
		{"3 MiB undeclared: chunks then one exact copy fit in 2×+step", 3 << 20, false, 2*(3<<20) + maxStep, false},
		{"3 MiB declared", 3 << 20, true, 2*(3<<20) + maxStep, false},
		{"over the budget", 3 << 20, false, 1 << 20, true},
		{"empty", 0, true, 1 << 10, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := bytes.Repeat([]byte("ab"), tc.size/2)
			b := NewBudget(tc.budget)
			h := b.Hold()
			size := int64(-1)
			if tc.declared {
				size = int64(len(want))
			}
			got, err := ReadUnarySized(WithHold(context.Background(), h), io.NopCloser(onlyReader{bytes.NewReader(want)}), size)
			if tc.wantErr {
				if err == nil || b.Used() != 0 {
					t.Fatalf("err %v, %d bytes held after a refusal", err, b.Used())
				}
				return
			}
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("err %v, %d bytes read of %d", err, len(got), len(want))
			}
			if held := b.Used(); held < int64(len(want)) || held > int64(len(want))+maxPrealloc+1 {
				t.Fatalf("%d bytes held for a %d-byte answer", held, len(want))
			}
			h.Release()
			h.Release()
			if b.Used() != 0 {
				t.Fatalf("%d bytes held after Release", b.Used())
			}
		})
	}
}
