package admin

import (
	"context"
	"fmt"
	"testing"
	"time"

	"switchboard/internal/queue"
	"switchboard/internal/store/redistest"
	"switchboard/internal/tenant"
)

// TestReplicasNeverServeAStaleMemo: two replicas share one Redis and each
// keeps the last state it read. A change by one is seen by the other's
// next read and next change (not its memo), and after Redis loses every
// record (a restart without persistence) the same version number reached
// again by new changes is read afresh, not taken from before the loss.
func TestReplicasNeverServeAStaleMemo(t *testing.T) {
	rs := redistest.Start(t)
	dial := func() *Redis {
		c, err := queue.Dial(rs.URL, 5*time.Second, 5*time.Second, 8)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return NewRedis(c)
	}
	a, b := dial(), dial()
	sa, sb := service(a, nil), service(b, nil)
	ctx := context.Background()
	names := func(st *State) map[string]bool {
		out := map[string]bool{}
		for _, k := range st.Keys {
			out[k.Name] = true
		}
		return out
	}
	for i := range 3 {
		if _, err := sa.CreateKey(ctx, "a", env, fmt.Appendf(nil, `{"name":"a%d","tenant":"cfg-team"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := b.Load(ctx); err != nil || len(st.Keys) != 3 || st.Version != 3 {
		t.Fatalf("replica b reads %v at %d: %v", names(st), st.Version, err)
	}
	// b changes from its memo (version 3); a's memo is at 3 too and must
	// not hide b's key.
	if _, err := sb.CreateKey(ctx, "b", env, []byte(`{"name":"b0","tenant":"cfg-team"}`)); err != nil {
		t.Fatal(err)
	}
	if st, _ := a.Load(ctx); !names(st)["b0"] || st.Version != 4 {
		t.Fatalf("replica a missed b's change: %v at %d", names(st), st.Version)
	}
	// a's next change decides on the state with b0 in it: a duplicate name.
	if _, err := sa.CreateKey(ctx, "a", env, []byte(`{"name":"b0","tenant":"cfg-team"}`)); err == nil {
		t.Fatal("replica a issued a second key named b0")
	}

	// Redis loses everything; four new changes by a bring the version
	// back to 4, which b's memo also holds.
	if err := a.c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := sa.CreateKey(ctx, "a", env, fmt.Appendf(nil, `{"name":"new%d","tenant":"cfg-team"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := b.Load(ctx)
	if err != nil || st.Version != 4 || len(st.Keys) != 4 || !names(st)["new0"] || names(st)["b0"] {
		t.Fatalf("after the loss replica b reads %v at %d: %v", names(st), st.Version, err)
	}
	if _, err := sb.CreateKey(ctx, "b", env, []byte(`{"name":"a0","tenant":"cfg-team"}`)); err != nil {
		t.Fatalf("a0 is free again after the loss, yet: %v", err)
	}
}

// TestLostRecordsKeepAuthOn: a replica that saw issued keys keeps /v1
// closed when the store loses them (Redis flushed or restarted without
// persistence): an empty store must not read as "auth was never on".
func TestLostRecordsKeepAuthOn(t *testing.T) {
	rs := redistest.Start(t)
	c, err := queue.Dial(rs.URL, 5*time.Second, 5*time.Second, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var got *tenant.Issued
	svc := service(NewRedis(c), func(is *tenant.Issued) { got = is })
	ctx := context.Background()
	is, err := svc.CreateKey(ctx, "a", env, []byte(`{"name":"k","tenant":"cfg-team"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RevokeKey(ctx, "a", is.Key.ID); err != nil {
		t.Fatal(err)
	}
	if !got.Recorded || !tenant.Compile(nilAuth(), got).Enabled() {
		t.Fatal("revoking the last key turned auth off")
	}
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := svc.Refresh(ctx, false); err != nil {
		t.Fatal(err)
	}
	if len(got.Keys) != 0 || !got.Recorded || !tenant.Compile(nilAuth(), got).Enabled() {
		t.Fatalf("after the store lost its records: %d keys, recorded %v: auth is off", len(got.Keys), got.Recorded)
	}
}
