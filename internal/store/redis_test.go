package store

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchboard/internal/limit"
	"switchboard/internal/store/redistest"
)

// lockedBuffer collects logs written from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func openRedis(t *testing.T, srv *redistest.Server) (*Redis, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	// A long command timeout: on a loaded machine a pipeline of a few
	// hundred decisions can take past the 500 ms default, and a timeout
	// sends them to the in-process fallback, which these tests would read
	// as a wrong count. A killed server still fails at once.
	r, err := OpenRedis(RedisOptions{URL: srv.URL, ProbeInterval: 20 * time.Millisecond, CommandTimeout: 10 * time.Second,
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, logs
}

func rawClient(t *testing.T, srv *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

func perHour(n int64) limit.Rate { return limit.Rate{Limit: n, Window: time.Hour} }

func TestRedisAdmitSettleUsage(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := openRedis(t, srv)
	now := time.Now()
	a := adm(now, "acme", func(a *Admission) {
		a.Debits = []limit.Debit{{Key: "t:acme:rpm", Rate: perHour(10), Cost: 1}, {Key: "p:x:tpm", Group: "p:x", Rate: perHour(1000), Cost: 100}}
		a.DailyLimit, a.EstTokens = 5, 100
		a.Budgeted, a.Budget, a.Hold = true, 1_000_000, 400_000
	})
	d := admit(t, s, a)
	if d.Refused != Admitted || !d.Recorded || d.Held != 400_000 || d.Spent != 400_000 {
		t.Fatalf("decision %+v", d)
	}
	if d.Snapshots[0].Remaining != 9 || d.Snapshots[1].Remaining != 900 || d.Snapshots[1].Limit != 1000 {
		t.Fatalf("snapshots %+v", d.Snapshots)
	}
	if d.Daily.Limit != 5 || d.Daily.Remaining != 4 || d.Daily.Reset < 23*time.Hour {
		t.Fatalf("daily %+v", d.Daily)
	}
	// The window is Redis's, and the usage read agrees with the admission.
	if d.WindowStart%3600 != 0 || d.Minute*60 > time.Now().Unix()+60 {
		t.Fatalf("window %d minute %d", d.WindowStart, d.Minute)
	}
	u, err := s.Usage(ctx, UsageQuery{Now: now, Tenant: "acme", WindowSecs: 3600})
	if err != nil || u.Requests != 1 || u.Tokens != 100 || u.Reserved != 400_000 || u.Settled != 0 || u.WindowStart != d.WindowStart {
		t.Fatalf("usage %+v %v", u, err)
	}
	err = s.Settle(ctx, &Settlement{Now: now, ID: a.ID, Tenant: "acme", Minute: d.Minute, WindowSecs: 3600,
		WindowStart: d.WindowStart, ReservedDelta: -400_000, SettledDelta: 123_456, TokenDelta: -60,
		Adjust:   []limit.Debit{{Key: "p:x:tpm", Group: "p:x", Rate: perHour(1000), Cost: -60}},
		Recorded: true, Final: true})
	if err != nil {
		t.Fatal(err)
	}
	u, _ = s.Usage(ctx, UsageQuery{Now: now, Tenant: "acme", WindowSecs: 3600})
	if u.Tokens != 40 || u.Reserved != 0 || u.Settled != 123_456 {
		t.Fatalf("after settle %+v", u)
	}
	snaps, err := s.Peek(ctx, now, []limit.Debit{{Key: "p:x:tpm", Group: "p:x", Rate: perHour(1000)}})
	if err != nil || snaps[0].Remaining != 960 {
		t.Fatalf("peek %+v %v", snaps, err)
	}
	// Settled money needs no record: the live hold is gone, nothing else
	// of the attempt is kept.
	raw := rawClient(t, srv)
	if n := raw.ZCard(ctx, holdsKey("acme")).Val(); n != 0 {
		t.Fatalf("%d live holds after the settlement", n)
	}
	if keys := raw.Keys(ctx, KeyPrefix+"a:*").Val(); len(keys) != 0 {
		t.Fatalf("attempt records kept: %v", keys)
	}
}

// A settlement applies at most once in Redis too (one script checks and
// applies).
func TestRedisSettlementAppliesOnce(t *testing.T) {
	s, _ := openRedis(t, redistest.Start(t))
	settlesOnce(t, s)
}

// Concurrent decisions on several clients admit exactly the limit, and a
// refusal debits no bucket: the second bucket is debited exactly as often.
func TestRedisBucketExactUnderConcurrency(t *testing.T) {
	srv := redistest.Start(t)
	stores := make([]*Redis, 3)
	for i := range stores {
		stores[i], _ = openRedis(t, srv)
	}
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := adm(time.Now(), "t", func(a *Admission) {
				a.Debits = []limit.Debit{{Key: "g:rpm", Rate: perHour(1000), Cost: 1}, {Key: "p:x:rpm", Group: "p:x", Rate: perHour(50), Cost: 1}}
			})
			d, err := stores[i%3].Admit(ctx, a)
			if err != nil {
				t.Error(err)
				return
			}
			if d.Refused == Admitted {
				ok.Add(1)
			} else if d.Refused != RefusedRate || d.Index != 1 || d.Wait <= 0 || d.Snapshot.Limit != 50 {
				t.Errorf("refusal %+v", d)
			}
		}()
	}
	wg.Wait()
	snaps, _ := stores[0].Peek(ctx, time.Now(), []limit.Debit{{Key: "g:rpm", Rate: perHour(1000)}})
	if ok.Load() != 50 || snaps[0].Remaining != 950 {
		t.Fatalf("admitted %d, global remaining %d; want 50 and 950", ok.Load(), snaps[0].Remaining)
	}
}

// A budget holds to the nano-USD across clients, and a budget refusal
// debits no bucket.
func TestRedisBudgetExact(t *testing.T) {
	srv := redistest.Start(t)
	s1, _ := openRedis(t, srv)
	s2, _ := openRedis(t, srv)
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := s1
			if i%2 == 1 {
				s = s2
			}
			a := adm(time.Now(), "b", func(a *Admission) {
				a.Budgeted, a.Budget, a.Hold = true, 1000, 7
				a.Debits = []limit.Debit{{Key: "t:b:rpm", Rate: perHour(1000), Cost: 1}}
			})
			d, err := s.Admit(ctx, a)
			if err != nil {
				t.Error(err)
				return
			}
			switch d.Refused {
			case Admitted:
				ok.Add(1)
			case RefusedBudget:
				if d.Wait < time.Second {
					t.Errorf("budget wait %v", d.Wait)
				}
			default:
				t.Errorf("refusal %+v", d)
			}
		}()
	}
	wg.Wait()
	u, _ := s1.Usage(ctx, UsageQuery{Tenant: "b", WindowSecs: 3600})
	snaps, _ := s1.Peek(ctx, time.Now(), []limit.Debit{{Key: "t:b:rpm", Rate: perHour(1000)}})
	if ok.Load() != 142 || u.Reserved != 994 || snaps[0].Remaining != 1000-142 {
		t.Fatalf("admitted %d reserved %d rpm remaining %d; want 142, 994, 858", ok.Load(), u.Reserved, snaps[0].Remaining)
	}
	// The remaining balance, held whole (unpriced under budget).
	d := admit(t, s2, adm(time.Now(), "b", func(a *Admission) { a.Budgeted, a.Budget, a.HoldRemaining = true, 1000, true }))
	if d.Refused != Admitted || d.Held != 6 || d.Spent != 1000 {
		t.Fatalf("hold remaining %+v", d)
	}
	d = admit(t, s2, adm(time.Now(), "b", func(a *Admission) { a.Budgeted, a.Budget, a.HoldRemaining = true, 1000, true }))
	if d.Refused != RefusedBudget {
		t.Fatalf("nothing left, still %+v", d)
	}
}

func TestRedisDailyPenaltyAndFull(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := openRedis(t, srv)
	now := time.Now()
	for i := range 3 {
		d := admit(t, s, adm(now, "d", func(a *Admission) { a.DailyLimit = 2 }))
		if want := i < 2; (d.Refused == Admitted) != want {
			t.Fatalf("admission %d: %+v", i, d)
		}
		if i == 2 && (d.Refused != RefusedDaily || d.Wait < 23*time.Hour || d.Daily.Limit != 2) {
			t.Fatalf("daily refusal %+v", d)
		}
	}
	// A penalty refuses the group even for an unlimited bucket, never
	// shortens, and shows in Peek.
	pd := limit.Debit{Key: "p:y:rpm", Group: "p:y", Rate: limit.Rate{Limit: limit.Unlimited, Window: time.Minute}, Cost: 1}
	if err := s.Penalize(ctx, now, "p:y", now.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	_ = s.Penalize(ctx, now, "p:y", now.Add(time.Second))
	d := admit(t, s, adm(now, "d", func(a *Admission) { a.Debits = []limit.Debit{pd} }))
	if d.Refused != RefusedRate || !d.Snapshot.Penalized || d.Wait < 2*time.Second || d.Wait > 3*time.Second {
		t.Fatalf("penalized %+v", d)
	}
	snaps, _ := s.Peek(ctx, now, []limit.Debit{pd})
	if !snaps[0].Penalized || snaps[0].Remaining != 0 {
		t.Fatalf("peek %+v", snaps)
	}
	// Live holds full: budgeted refused, unbudgeted admitted (it takes
	// no live hold).
	d = admit(t, s, adm(now, "f", func(a *Admission) { a.MaxRetained = 1; a.Budgeted, a.Budget, a.Hold = true, 10, 1 }))
	if d.Refused != Admitted || !d.Recorded {
		t.Fatalf("first budgeted %+v", d)
	}
	d = admit(t, s, adm(now, "f", func(a *Admission) { a.MaxRetained = 1; a.Budgeted, a.Budget, a.Hold = true, 10, 1 }))
	if d.Refused != RefusedFull {
		t.Fatalf("full %+v", d)
	}
	d = admit(t, s, adm(now, "f", func(a *Admission) { a.MaxRetained = 1 }))
	if d.Refused != Admitted || d.Recorded {
		t.Fatalf("full, unbudgeted %+v", d)
	}
}

// Amounts past 2^53 freeze the window rather than lose precision.
func TestRedisOverflowFreezesWindow(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := openRedis(t, srv)
	d := admit(t, s, adm(time.Now(), "o", func(a *Admission) { a.Budgeted, a.Budget, a.Hold = true, 1<<53, 10 }))
	if d.Refused != Admitted {
		t.Fatalf("%+v", d)
	}
	if err := s.Settle(ctx, &Settlement{ID: "x", Tenant: "o", WindowSecs: 3600, WindowStart: d.WindowStart,
		SettledDelta: 1<<53 + 10}); err != nil {
		t.Fatal(err)
	}
	// Releasing everything cannot reopen it.
	_ = s.Settle(ctx, &Settlement{ID: "y", Tenant: "o", WindowSecs: 3600, WindowStart: d.WindowStart,
		ReservedDelta: -10, SettledDelta: -(1 << 53)})
	d = admit(t, s, adm(time.Now(), "o", func(a *Admission) { a.Budgeted, a.Budget, a.Hold = true, 1<<53, 1 }))
	if d.Refused != RefusedBudget {
		t.Fatalf("frozen window admitted: %+v", d)
	}
}

// A flushed script cache (as after a restart) is reloaded transparently.
func TestRedisReloadsScriptsOnNoscript(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := openRedis(t, srv)
	admit(t, s, adm(time.Now(), "n"))
	if err := rawClient(t, srv).ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d := admit(t, s, adm(time.Now(), "n")); d.Refused != Admitted {
		t.Fatalf("%+v", d)
	}
	if !s.Available() {
		t.Fatal("NOSCRIPT marked redis unavailable")
	}
}

// Redis going away: unbudgeted admissions are decided in process,
// budgeted ones and settlements of Redis attempts fail, one warning is
// logged; once Redis answers again decisions go back to it.
func TestRedisFailOpenForRatesClosedForSpend(t *testing.T) {
	srv := redistest.Start(t)
	s, logs := openRedis(t, srv)
	rpm := []limit.Debit{{Key: "p:z:rpm", Group: "p:z", Rate: perHour(2), Cost: 1}}
	first := adm(time.Now(), "k", func(a *Admission) { a.Debits = rpm; a.Budgeted, a.Budget, a.Hold = true, 100, 10 })
	d1 := admit(t, s, first)
	srv.Kill()
	start := time.Now()
	for i := range 3 {
		a := adm(time.Now(), "k", func(a *Admission) { a.Debits = rpm })
		d, err := s.Admit(ctx, a)
		if err != nil {
			t.Fatalf("unbudgeted admission %d without redis: %v", i, err)
		}
		// The in-process bucket is full at the outage: it admits 2.
		if (d.Refused == Admitted) != (i < 2) {
			t.Fatalf("fallback admission %d: %+v", i, d)
		}
		if i == 0 {
			if err := s.Settle(ctx, &Settlement{ID: a.ID, Tenant: "k", Minute: d.Minute, WindowSecs: 3600,
				WindowStart: d.WindowStart, TokenDelta: -5, Final: true}); err != nil {
				t.Fatalf("settling a fallback attempt: %v", err)
			}
		}
	}
	if _, err := s.Admit(ctx, adm(time.Now(), "k", func(a *Admission) { a.Budgeted, a.Budget, a.Hold = true, 100, 1 })); err == nil {
		t.Fatal("budgeted admission without redis succeeded")
	}
	if err := s.Settle(ctx, &Settlement{ID: first.ID, Tenant: "k", WindowSecs: 3600, WindowStart: d1.WindowStart,
		ReservedDelta: -10, Recorded: true, Final: true}); err == nil {
		t.Fatal("settlement without redis reported success")
	}
	if _, err := s.Usage(ctx, UsageQuery{Tenant: "k", WindowSecs: 3600}); err == nil {
		t.Fatal("usage without redis succeeded")
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("decisions without redis took %v", time.Since(start))
	}
	if n := strings.Count(logs.String(), "redis is unavailable"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, logs)
	}
	srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for !s.Available() {
		if time.Now().After(deadline) {
			t.Fatal("store did not notice redis came back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Back on the (empty, restarted) server: a budgeted admission works.
	if d := admit(t, s, adm(time.Now(), "k", func(a *Admission) { a.Budgeted, a.Budget, a.Hold = true, 100, 10 })); d.Refused != Admitted {
		t.Fatalf("after recovery %+v", d)
	}
	if !strings.Contains(logs.String(), "redis answers again") {
		t.Fatalf("no recovery log:\n%s", logs)
	}
}

// Boot with Redis down: no error, no hang; decisions follow Redis once it
// is there.
func TestRedisOpenWhileDown(t *testing.T) {
	srv := redistest.Start(t)
	srv.Kill()
	start := time.Now()
	s, _ := openRedis(t, srv)
	if s.Available() || time.Since(start) > 3*time.Second {
		t.Fatalf("available %v after %v", s.Available(), time.Since(start))
	}
	if d := admit(t, s, adm(time.Now(), "u")); d.Refused != Admitted {
		t.Fatalf("%+v", d)
	}
	srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for !s.Available() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !s.Available() {
		t.Fatal("never recovered")
	}
}

func TestRedisURLError(t *testing.T) {
	if _, err := OpenRedis(RedisOptions{URL: "http://x"}); err == nil {
		t.Fatal("bad url accepted")
	}
}

// A caller that leaves while its decision is still queued drops it, and a
// dropped decision is never sent: whatever the race between leaving and
// the pipeline, a live hold exists exactly for the admissions that
// returned a decision.
func TestRedisLeftCallsAreDroppedUnsent(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := openRedis(t, srv)
	raw := rawClient(t, srv)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	var decided, dropped int
	for range 200 {
		a := adm(time.Now(), "t", func(a *Admission) { a.Budgeted, a.Budget, a.Hold = true, 1<<40, 1 })
		d, err := s.Admit(gone, a)
		exists := raw.ZScore(ctx, holdsKey("t"), a.ID).Err() == nil
		switch {
		case err == nil && d.Refused == Admitted:
			decided++
			if !exists {
				t.Fatalf("admitted %s without a live hold", a.ID)
			}
		case err != nil:
			dropped++
			if exists {
				t.Fatalf("%s was refused to its caller (%v) but applied", a.ID, err)
			}
		default:
			t.Fatalf("decision %+v", d)
		}
	}
	t.Logf("%d decided, %d dropped unsent", decided, dropped)
}
