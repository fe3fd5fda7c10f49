package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"switchboard/internal/queue"
	"switchboard/internal/store/redistest"
	"switchboard/internal/tenant"
)

// replica is one gateway's admin store on the Redis at url.
func replica(t *testing.T, url string) *Redis {
	t.Helper()
	c, err := queue.Dial(url, 5*time.Second, 5*time.Second, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return NewRedis(c)
}

// TestReplicasNeverServeAStaleMemo: two replicas share one Redis and each
// keeps the last state it read. A change by one is seen by the other's
// next read and next change (not its memo), and after Redis loses every
// record (a restart without persistence) the same version number reached
// again by new changes is read afresh, not taken from before the loss.
func TestReplicasNeverServeAStaleMemo(t *testing.T) {
	rs := redistest.Start(t)
	dial := func() *Redis { return replica(t, rs.URL) }
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
	st := replica(t, redistest.Start(t).URL)
	c := st.c
	var got *tenant.Issued
	svc := service(st, func(is *tenant.Issued) { got = is })
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

// TestFollowerCatchesUpByAudit: a replica a few changes behind reads only
// the records those changes touched (the audit rows name them) and ends
// with exactly the state a fresh full read gives: created, updated,
// rotated and revoked keys, created, updated and deleted tenants.
func TestFollowerCatchesUpByAudit(t *testing.T) {
	rs := redistest.Start(t)
	dial := func() *Redis { return replica(t, rs.URL) }
	a, b := dial(), dial()
	sa := service(a, nil)
	ctx := context.Background()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(sa.CreateTenant(ctx, "a", env, []byte(`{"name":"t1","rpm":5}`)))
	k1, err := sa.CreateKey(ctx, "a", env, []byte(`{"name":"k1","tenant":"t1"}`))
	must(k1, err)
	must(sa.CreateTenant(ctx, "a", env, []byte(`{"name":"t3"}`)))
	must(b.Load(ctx)) // b remembers version 3
	// Every kind of change while b is not looking.
	must(sa.CreateTenant(ctx, "a", env, []byte(`{"name":"t2"}`)))
	must(sa.UpdateTenant(ctx, "a", "t1", []byte(`{"rpm":9}`)))
	k2, err := sa.CreateKey(ctx, "a", env, []byte(`{"name":"k2","tenant":"t2"}`))
	must(k2, err)
	must(sa.UpdateKey(ctx, "a", env, k1.Key.ID, []byte(`{"tier":3}`)))
	must(sa.RotateKey(ctx, "a", k1.Key.ID, []byte(`{}`)))
	must(sa.RevokeKey(ctx, "a", k2.Key.ID))
	must(nil, sa.DeleteTenant(ctx, "a", "t3"))
	before := hgetalls(t, b)
	got, err := b.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := hgetalls(t, b) - before; n != 0 {
		t.Fatalf("the follower read every record (%d HGETALL) instead of the 7 changes' records", n)
	}
	want, err := dial().Load(ctx) // a fresh replica reads every record
	if err != nil {
		t.Fatal(err)
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) || got.Version != 10 {
		t.Fatalf("follower at %d:\n%s\nfull read at %d:\n%s", got.Version, gj, want.Version, wj)
	}
	// b's next change decides on the caught-up state.
	if _, err := service(b, nil).CreateKey(ctx, "b", env, []byte(`{"name":"k2","tenant":"t1"}`)); err != nil {
		t.Fatalf("k2 is revoked, its name free again: %v", err)
	}
	if _, err := service(b, nil).CreateTenant(ctx, "b", env, []byte(`{"name":"t2"}`)); err == nil {
		t.Fatal("b created a second tenant t2")
	}
}

// hgetalls is how many HGETALL the Redis behind r has run.
func hgetalls(t *testing.T, r *Redis) int {
	t.Helper()
	info, err := r.c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, rest, found := strings.Cut(info, "cmdstat_hgetall:calls=")
	if !found {
		return 0
	}
	n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
	return n
}
