package store

import (
	"testing"
	"time"

	"switchboard/internal/limit"
	"switchboard/internal/store/redistest"
)

// TestRedisSlidingWindowShared: a sliding window (limits.window: sliding)
// shared by two replicas through Redis counts each admission until exactly
// one window after it: Remaining 1 then 0, Reset the time until the first
// admission leaves, a refusal waiting as long, and room again after it.
// Redis keeps its own clock, so this runs on a 3 s window in real time,
// with margins of a few hundred ms for a loaded machine.
func TestRedisSlidingWindowShared(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := openRedis(t, srv)
	b, _ := openRedis(t, srv)
	const window = 3 * time.Second
	debit := []limit.Debit{{Key: "t:acme:rpm", Rate: limit.Rate{Limit: 2, Window: window, Sliding: true}, Cost: 1}}
	with := func(a *Admission) { a.Debits = debit }

	start := time.Now()
	d1 := admit(t, a, adm(time.Now(), "acme", with))
	if d1.Refused != Admitted || d1.Snapshots[0].Remaining != 1 || d1.Snapshots[0].Reset < window-300*time.Millisecond {
		t.Fatalf("first: %+v", d1)
	}
	time.Sleep(time.Second)
	d2 := admit(t, b, adm(time.Now(), "acme", with))
	left := window - time.Since(start)
	if d2.Refused != Admitted || d2.Snapshots[0].Remaining != 0 || d2.Snapshots[0].Reset > left+300*time.Millisecond || d2.Snapshots[0].Reset < left-100*time.Millisecond {
		t.Fatalf("second: %+v (the first leaves in %v)", d2, left)
	}
	d3 := admit(t, a, adm(time.Now(), "acme", with))
	if d3.Refused != RefusedRate || d3.Wait > d2.Snapshots[0].Reset || d3.Wait <= 0 {
		t.Fatalf("third: %+v", d3)
	}
	snaps, err := b.Peek(ctx, time.Now(), debit)
	if err != nil || snaps[0].Remaining != 0 || snaps[0].Limit != 2 {
		t.Fatalf("peek: %+v %v", snaps, err)
	}
	time.Sleep(time.Until(start.Add(window + 300*time.Millisecond)))
	if d := admit(t, b, adm(time.Now(), "acme", with)); d.Refused != Admitted || d.Snapshots[0].Remaining != 0 {
		t.Fatalf("after the first left: %+v", d)
	}
	// The bucket and the window of one key are separate counters.
	bucket := []limit.Debit{{Key: "t:acme:rpm", Rate: limit.Rate{Limit: 2, Window: window}, Cost: 1}}
	if d := admit(t, a, adm(time.Now(), "acme", func(a *Admission) { a.Debits = bucket })); d.Refused != Admitted {
		t.Fatalf("bucket: %+v", d)
	}
}
