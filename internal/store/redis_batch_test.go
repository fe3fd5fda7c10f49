package store

import (
	"testing"
	"time"

	"switchboard/internal/limit"
	"switchboard/internal/store/redistest"
)

// Admissions and settlements queued together run as one batch script;
// each is decided as its own script would decide it, in order: a bucket
// of 5 admits exactly the first 5 of 8, a settlement queued after an
// admission of the same batch applies to it, the budget holds to the
// nano-USD, and an operation that fails (its window key is of the wrong
// type) fails alone.
func TestRedisBatchDecidesEachInOrder(t *testing.T) {
	srv := redistest.Start(t)
	r, _ := openRedis(t, srv)
	rpm := limit.Debit{Key: "t:b:rpm", Rate: perHour(5), Cost: 1}
	admission := func(tenant string) *Admission {
		return adm(time.Now(), tenant, func(a *Admission) {
			a.Debits = []limit.Debit{rpm}
			a.Budgeted, a.Budget, a.Hold = true, 1000, 100
		})
	}
	var as []*Admission
	var calls []*call
	var xs []*scriptArgs
	for range 8 {
		a := admission("b")
		as = append(as, a)
		x := r.admitArgs(a, true)
		xs = append(xs, x)
		calls = append(calls, &call{script: scriptAdmit, cmd: x.cmd})
	}
	// The first admission's final settlement, in the same batch: it
	// releases 100 and settles 30. Its window start is the one the
	// admission will choose (this test does not cross a day's end).
	ws := WindowStart(time.Now(), 3600)
	st := r.settleArgs(&Settlement{ID: as[0].ID, Tenant: "b", Minute: Minute(time.Now()), WindowSecs: 3600, WindowStart: ws,
		ReservedDelta: -100, SettledDelta: 30, Recorded: true, Final: true})
	calls = append(calls, &call{script: scriptSettle, cmd: st.cmd})
	// An admission of another tenant whose window key is a string: its
	// script fails, and only its call gets the error.
	bad := admission("bad")
	bad.Debits = nil
	if err := rawClient(t, srv).Set(ctx, windowPrefix("bad", 3600)+":"+i64(ws), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	bx := r.admitArgs(bad, true)
	calls = append(calls, &call{script: scriptAdmit, cmd: bx.cmd})
	if us := r.p.units(calls); len(us) != 1 || len(us[0].calls) != len(calls) {
		t.Fatalf("%d units, want one batch of %d", len(us), len(calls))
	}
	r.p.doAll(ctx, calls)
	for i, a := range as {
		c := calls[i]
		if c.err != nil {
			t.Fatalf("admission %d: %v", i, c.err)
		}
		d, err := decodeDecision(c.v, a)
		if err != nil {
			t.Fatal(err)
		}
		if want := i < 5; (d.Refused == Admitted) != want {
			t.Errorf("admission %d: %+v, admitted want %v", i, d, want)
		}
		if i < 5 && (d.Snapshots[0].Remaining != int64(4-i) || d.Spent != int64(100*(i+1))) {
			t.Errorf("admission %d: remaining %d spent %d", i, d.Snapshots[0].Remaining, d.Spent)
		}
	}
	if !applied(calls[8].v) || calls[8].err != nil {
		t.Errorf("settlement in the batch: %v %v", calls[8].v, calls[8].err)
	}
	if calls[9].err == nil {
		t.Errorf("the failing admission got %v", calls[9].v)
	}
	u, err := r.Usage(ctx, UsageQuery{Now: time.Now(), Tenant: "b", WindowSecs: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if u.Requests != 5 || u.Reserved != 400 || u.Settled != 30 {
		t.Errorf("usage %+v; want 5 requests, 400 reserved, 30 settled", u)
	}
	for _, x := range append(xs, st, bx) {
		x.release()
	}
}
