package limit

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func rpm(n int64) Rate { return Rate{Limit: n, Window: time.Minute} }

func TestBucketAdmitsExactlyTheLimitConcurrently(t *testing.T) {
	for _, limit := range []int64{1, 7, 50, 199, 200} {
		m := NewMemory()
		var ok atomic.Int64
		var wg sync.WaitGroup
		for range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ds := []Debit{{Key: "t:a:rpm", Rate: rpm(limit), Cost: 1}, {Key: "g:rpm", Rate: rpm(1000), Cost: 1}}
				if r := m.Take(t0, ds, nil); r.Refused < 0 {
					ok.Add(1)
				}
			}()
		}
		wg.Wait()
		if ok.Load() != limit {
			t.Errorf("limit %d: admitted %d", limit, ok.Load())
		}
		// The global bucket was debited exactly as often: no partial debits.
		if s := m.Peek(t0, Debit{Key: "g:rpm", Rate: rpm(1000)}); s.Remaining != 1000-limit {
			t.Errorf("limit %d: global remaining %d, want %d", limit, s.Remaining, 1000-limit)
		}
	}
}

func TestBucketAllOrNothing(t *testing.T) {
	tests := []struct {
		name      string
		ds        []Debit
		refused   int
		remaining []int64 // remaining of each bucket afterwards
	}{
		{"all fit", []Debit{{Key: "a", Rate: rpm(3), Cost: 1}, {Key: "b", Rate: rpm(10), Cost: 4}}, -1, []int64{2, 6}},
		{"cost above capacity is clamped", []Debit{{Key: "a", Rate: rpm(3), Cost: 1}, {Key: "b", Rate: rpm(10), Cost: 11}}, -1, []int64{2, 0}},
		{"explicit zero denies, others untouched", []Debit{{Key: "a", Rate: rpm(3), Cost: 1}, {Key: "z", Rate: rpm(0), Cost: 1}}, 1, []int64{3, 0}},
		{"unlimited never refuses", []Debit{{Key: "u", Rate: Rate{Limit: Unlimited}, Cost: 1 << 50}, {Key: "a", Rate: rpm(3), Cost: 3}}, -1, []int64{Unlimited, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemory()
			r := m.Take(t0, tt.ds, nil)
			if r.Refused != tt.refused {
				t.Fatalf("refused = %d, want %d", r.Refused, tt.refused)
			}
			for i, d := range tt.ds {
				s := m.Peek(t0, d)
				want := tt.remaining[i]
				if d.Rate.Limit == Unlimited {
					if s.Limit != Unlimited {
						t.Errorf("bucket %s limit = %d", d.Key, s.Limit)
					}
					continue
				}
				if s.Remaining != want {
					t.Errorf("bucket %s remaining = %d, want %d", d.Key, s.Remaining, want)
				}
			}
		})
	}
}

func TestBucketRefusalLeavesEveryBucket(t *testing.T) {
	m := NewMemory()
	m.Take(t0, []Debit{{Key: "b", Rate: rpm(2), Cost: 2}}, nil) // empty b
	ds := []Debit{{Key: "a", Rate: rpm(5), Cost: 1}, {Key: "b", Rate: rpm(2), Cost: 1}}
	r := m.Take(t0, ds, nil)
	if r.Refused != 1 || r.Snapshot.Wait != 30*time.Second {
		t.Fatalf("refused %d wait %v, want 1 and 30s", r.Refused, r.Snapshot.Wait)
	}
	if s := m.Peek(t0, ds[0]); s.Remaining != 5 {
		t.Errorf("a was debited by a refused Take: remaining %d", s.Remaining)
	}
	// commit declining also debits nothing.
	r = m.Take(t0, ds[:1], func() bool { return false })
	if r.Committed || m.Peek(t0, ds[0]).Remaining != 5 {
		t.Errorf("declined commit debited: %+v", r)
	}
}

func TestBucketRefillResetAndAdjust(t *testing.T) {
	m := NewMemory()
	d := Debit{Key: "k", Rate: rpm(2), Cost: 1}
	r := m.Take(t0, []Debit{d}, nil)
	if s := r.Snapshots[0]; s.Limit != 2 || s.Remaining != 1 || s.Reset != 30*time.Second {
		t.Errorf("first = %+v", s)
	}
	r = m.Take(t0, []Debit{d}, nil)
	if s := r.Snapshots[0]; s.Remaining != 0 || s.Reset != time.Minute {
		t.Errorf("second = %+v", s)
	}
	at := t0.Add(17 * time.Second)
	r = m.Take(at, []Debit{d}, nil)
	if r.Refused != 0 || r.Snapshot.Wait != 13*time.Second {
		t.Errorf("third = %+v, want refusal with 13s wait", r)
	}
	if r := m.Take(t0.Add(30*time.Second), []Debit{d}, nil); r.Refused != -1 {
		t.Errorf("after 30s one token is back: %+v", r)
	}
	// Adjust: refund 1, then charge 3 more than estimated (debt bounded by capacity).
	m.Adjust(t0.Add(30*time.Second), d, -1)
	if s := m.Peek(t0.Add(30*time.Second), d); s.Remaining != 1 {
		t.Errorf("after refund remaining %d", s.Remaining)
	}
	m.Adjust(t0.Add(30*time.Second), d, 10)
	if s := m.Peek(t0.Add(30*time.Second), d); s.Remaining != 0 || s.Reset != 2*time.Minute {
		t.Errorf("after overrun %+v, want 0 remaining and 2m to full (debt of one capacity)", s)
	}
	// A reload lowering the limit keeps what was used.
	m2 := NewMemory()
	m2.Take(t0, []Debit{{Key: "k", Rate: rpm(10), Cost: 4}}, nil)
	if s := m2.Peek(t0, Debit{Key: "k", Rate: rpm(5)}); s.Remaining != 1 || s.Limit != 5 {
		t.Errorf("after reload %+v", s)
	}
}

func TestBucketPenalty(t *testing.T) {
	m := NewMemory()
	d := Debit{Key: "p:x:rpm", Group: "p:x", Rate: Rate{Limit: Unlimited}, Cost: 1}
	other := Debit{Key: "p:y:rpm", Group: "p:y", Rate: rpm(5), Cost: 1}
	m.Penalize(t0, "p:x", t0.Add(5*time.Second))
	m.Penalize(t0, "p:x", t0.Add(2*time.Second)) // never shortens
	r := m.Take(t0.Add(time.Second), []Debit{other, d}, nil)
	if r.Refused != 1 || !r.Snapshot.Penalized || r.Snapshot.Wait != 4*time.Second {
		t.Fatalf("penalized take = %+v", r)
	}
	if s := m.Peek(t0, other); s.Remaining != 5 {
		t.Errorf("other debited: %+v", s)
	}
	if r := m.Take(t0.Add(5*time.Second), []Debit{d}, nil); r.Refused != -1 {
		t.Errorf("penalty outlived its end: %+v", r)
	}
}
