package store

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"switchboard/internal/limit"
	"switchboard/internal/store/redistest"
)

// scripts/redis-tag-keys.lua moves a Redis written without hash tags to
// the tagged names: spend windows, daily counters and buckets read the
// same after it, the admin namespace moves, idempotency records of the
// old layouts (which do not name their tenant) are deleted and the
// tenant-tagged ones kept, the job queue's old keys are left alone (it is
// drained before the switch, not moved), a second run changes nothing.
func TestRedisTagKeysMigration(t *testing.T) {
	src, err := os.ReadFile("../../scripts/redis-tag-keys.lua")
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t)
	s, _ := openRedis(t, srv)
	raw := rawClient(t, srv)
	now := time.Now()
	ds := []limit.Debit{{Key: "t:a:b:rpm", Rate: perHour(10), Cost: 1}, {Key: "p:x:rpm", Group: "p:x", Rate: perHour(20), Cost: 1},
		{Key: "p:x:tpm", Group: "p:x", Rate: limit.Rate{Limit: 1000, Window: time.Hour, Sliding: true}, Cost: 100}}
	var first *Decision
	for range 2 {
		d, err := s.Admit(ctx, adm(now, "a:b", func(a *Admission) { a.Debits, a.Budgeted, a.Budget, a.Hold = ds, true, 10_000, 500 }))
		if err != nil || d.Refused != Admitted {
			t.Fatalf("%+v %v", d, err)
		}
		first = d
	}
	if err := s.Penalize(ctx, now, "p:x", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	usage := func() UsageReport {
		u, err := s.Usage(ctx, UsageQuery{Now: now, Tenant: "a:b", WindowSecs: 3600})
		if err != nil {
			t.Fatal(err)
		}
		return *u
	}
	peek := func() []limit.Snapshot {
		p, err := s.Peek(ctx, now, ds)
		if err != nil {
			t.Fatal(err)
		}
		for i := range p {
			p[i].Reset = 0
		}
		return p
	}
	wantU, wantP := usage(), peek()
	if wantU.Reserved != 1000 || wantU.Requests != 2 || !wantP[1].Penalized || wantP[0].Remaining != 8 {
		t.Fatalf("before: %+v %+v", wantU, wantP)
	}
	// The layout before tags: every name as it was.
	tagged := regexp.MustCompile(`^switchboard:([a-z]+):\{([^}]*)\}(.*)$`)
	for _, k := range raw.Keys(ctx, "switchboard:*").Val() {
		m := tagged.FindStringSubmatch(k)
		if m == nil {
			continue
		}
		kind, tag, tail := m[1], m[2], m[3]
		var old string
		switch kind {
		case "b", "sw":
			old = "switchboard:" + kind + ":" + tag + tail
		case "pen":
			old = "switchboard:pen:" + tag
		case "d", "dm", "w":
			old = "switchboard:" + kind + ":" + strings.TrimPrefix(tag, "t:") + tail
		case "holds", "settled":
			old = "switchboard:" + kind
		default:
			t.Fatalf("a key the test does not know: %q", k)
		}
		raw.Rename(ctx, k, old)
	}
	raw.Set(ctx, "switchboard:admin:version", "7", 0)
	raw.Set(ctx, "switchboard:q:v1:format", "1", 0)
	// Idempotency: untagged, in the one-slot namespace of the first tagged
	// versions, and under a tenant's tag (the current layout).
	raw.HSet(ctx, "switchboard:idem:v1:acct", "bytes", "12")
	raw.HSet(ctx, "switchboard:{idem:v1}:acct", "bytes", "12")
	raw.HSet(ctx, "switchboard:{idem:v1}:e:00ff", "st", "done")
	current := "switchboard:idem:v1:" + TenantTag("a:b") + ":acct"
	raw.HSet(ctx, current, "bytes", "7")
	if u := usage(); u.Reserved != 0 || u.Requests != 0 {
		t.Fatalf("the old names are not read: %+v", u)
	}
	for run, want := range []string{"[9 4 0 0]", "[0 0 0 0]"} {
		got, err := raw.Eval(ctx, string(src), nil).Result()
		if err != nil {
			t.Fatal(err)
		}
		if g := fmt.Sprint(got); g != want {
			t.Fatalf("run %d: renamed, deleted, taken, unknown = %s, want %s", run+1, g, want)
		}
	}
	if u := usage(); u != wantU {
		t.Fatalf("usage after: %+v, before %+v", u, wantU)
	}
	if p := peek(); len(p) != 3 || p[0] != wantP[0] || p[1] != wantP[1] || p[2] != wantP[2] {
		t.Fatalf("buckets after: %+v, before %+v", p, wantP)
	}
	if raw.Get(ctx, "switchboard:{admin}:version").Val() != "7" {
		t.Fatal("the admin namespace did not move")
	}
	if raw.Get(ctx, "switchboard:q:v1:format").Val() != "1" || raw.Exists(ctx, "switchboard:{q:v1}:format").Val() != 0 {
		t.Fatal("the queue's old keys were touched")
	}
	if n := raw.Exists(ctx, "switchboard:idem:v1:acct", "switchboard:{idem:v1}:acct", "switchboard:{idem:v1}:e:00ff").Val(); n != 0 ||
		raw.HGet(ctx, current, "bytes").Val() != "7" {
		t.Fatalf("idempotency: %d old records left, or the tenant-tagged one touched", n)
	}
	// The moved attempt settles against its moved window.
	if err := s.Settle(ctx, &Settlement{Now: now, ID: "x", Tenant: "a:b", Minute: first.Minute, WindowSecs: 3600,
		WindowStart: first.WindowStart, ReservedDelta: -500, SettledDelta: 300, Final: true}); err != nil {
		t.Fatal(err)
	}
	if u := usage(); u.Reserved != 500 || u.Settled != 300 {
		t.Fatalf("after a settlement: %+v", u)
	}
}
