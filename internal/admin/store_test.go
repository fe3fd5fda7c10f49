package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/queue"
	"switchboard/internal/store/redistest"
	"switchboard/internal/tenant"
)

// backends returns a fresh store of each kind: SQLite (in memory) and
// Redis (a real redis-server); each test runs against both.
func backends(t *testing.T) map[string]func() Store {
	return map[string]func() Store{
		"sqlite": func() Store {
			s, err := OpenMemory()
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"redis": func() Store {
			rs := redistest.Start(t)
			c, err := queue.Dial(rs.URL, 5*time.Second, 5*time.Second, 32)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return NewRedis(c)
		},
	}
}

func service(st Store, apply func(*tenant.Issued)) *Service {
	return &Service{St: st, Clock: clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)), Log: slog.New(slog.DiscardHandler), Apply: apply}
}

var env = &Env{ConfigTenants: map[string]bool{"cfg-team": true}, Model: func(n string) (string, bool) { return n, n == "m" }}

// TestConcurrentChangesSerialise: 16 admins create a key of the same name
// at once: exactly one wins, the others get 409 duplicate_name, and the
// version and the audit log count one change per success.
func TestConcurrentChangesSerialise(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			st := open()
			svc := service(st, nil)
			ctx := context.Background()
			var wg sync.WaitGroup
			var mu sync.Mutex
			won, dup := 0, 0
			for i := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := svc.CreateKey(ctx, fmt.Sprintf("admin-%d", i), env, []byte(`{"name":"same","tenant":"cfg-team"}`))
					mu.Lock()
					defer mu.Unlock()
					if e, ok := AsError(err); ok && e.Status == http.StatusConflict && e.Param == "name" {
						dup++
					} else if err == nil {
						won++
					} else {
						t.Errorf("create: %v", err)
					}
				}()
			}
			wg.Wait()
			if won != 1 || dup != 15 {
				t.Fatalf("won %d, duplicates %d", won, dup)
			}
			// 16 distinct names: all win, each one version and one audit row.
			for i := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := svc.CreateKey(ctx, "a", env, fmt.Appendf(nil, `{"name":"k%d","tenant":"cfg-team"}`, i)); err != nil {
						t.Errorf("create k%d: %v", i, err)
					}
				}()
			}
			wg.Wait()
			v, err := st.Version(ctx)
			if err != nil || v != 17 {
				t.Fatalf("version %d %v, want 17", v, err)
			}
			rows, err := st.Audit(ctx, AuditQuery{Limit: 100})
			if err != nil || len(rows) != 17 {
				t.Fatalf("audit rows %d %v", len(rows), err)
			}
			for i, r := range rows {
				if r.Seq != int64(i+1) || r.Action != ActionKeyCreate {
					t.Errorf("row %d: %+v", i, r)
				}
			}
			loaded, err := st.Load(ctx)
			if err != nil || len(loaded.Keys) != 17 || loaded.Version != 17 {
				t.Fatalf("load: %d keys at %d, %v", len(loaded.Keys), loaded.Version, err)
			}
		})
	}
}

// TestRefusedChangeWritesNothing: a change whose check fails leaves no
// record, no audit row and the version as it was.
func TestRefusedChangeWritesNothing(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			st := open()
			svc := service(st, nil)
			ctx := context.Background()
			if _, err := svc.CreateKey(ctx, "a", env, []byte(`{"name":"k","tenant":"nobody"}`)); err == nil {
				t.Fatal("a key of an unknown tenant was created")
			}
			if err := svc.DeleteTenant(ctx, "a", "nobody"); err == nil {
				t.Fatal("deleted a tenant that does not exist")
			}
			_, err := st.Update(ctx, func(*State) (*Change, error) { return nil, errors.New("changed my mind") })
			if err == nil {
				t.Fatal("an aborted change succeeded")
			}
			v, _ := st.Version(ctx)
			rows, _ := st.Audit(ctx, AuditQuery{Limit: 10})
			loaded, _ := st.Load(ctx)
			if v != 0 || len(rows) != 0 || len(loaded.Keys) != 0 {
				t.Errorf("after refusals: version %d, %d audit rows, %d keys", v, len(rows), len(loaded.Keys))
			}
		})
	}
}

// TestIssuedFollowsState: revoked keys leave the table; a rotation's old
// secret stays only within its grace; a key's tenant limits come from the
// issued tenant.
func TestIssuedFollowsState(t *testing.T) {
	st, _ := OpenMemory()
	var got *tenant.Issued
	svc := service(st, func(is *tenant.Issued) { got = is })
	ctx := context.Background()
	if _, err := svc.CreateTenant(ctx, "a", env, []byte(`{"name":"t","rpm":7}`)); err != nil {
		t.Fatal(err)
	}
	is, err := svc.CreateKey(ctx, "a", env, []byte(`{"name":"k","tenant":"t","models":["m"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Keys) != 1 || *got.Tenants["t"].RPM != 7 || got.Keys[0].Models[0] != "m" {
		t.Fatalf("issued: %+v", got)
	}
	if _, err := svc.RotateKey(ctx, "a", is.Key.ID, []byte(`{"grace_seconds":30}`)); err != nil {
		t.Fatal(err)
	}
	if k := got.Keys[0]; k.Previous == ([32]byte{}) || !k.PreviousUntil.Equal(svc.Clock.Now().Add(30*time.Second)) {
		t.Fatalf("rotation: %+v", k)
	}
	tab := tenant.Compile(nilAuth(), got)
	id, ok := tab.Lookup(is.Secret)
	if !ok || !id.Expired(svc.Clock.Now().Add(31*time.Second)) || id.Expired(svc.Clock.Now()) {
		t.Fatalf("old secret within grace: %+v %v", id, ok)
	}
	if _, err := svc.RevokeKey(ctx, "a", is.Key.ID); err != nil {
		t.Fatal(err)
	}
	if len(got.Keys) != 0 {
		t.Fatalf("a revoked key is still issued: %+v", got.Keys)
	}
}

func nilAuth() *config.Auth { return &config.Auth{} }

// quietStore is a store whose change notifications never arrive (a lost
// subscription): only the version poll can tell a replica.
type quietStore struct{ Store }

func (quietStore) Changes(context.Context) <-chan struct{} { return nil }

// TestPollIsTheBackstop: a replica that hears of no change still applies
// another replica's change at its next version poll (PollInterval).
func TestPollIsTheBackstop(t *testing.T) {
	shared, err := OpenMemory()
	if err != nil {
		t.Fatal(err)
	}
	writer := service(shared, nil)
	var mu sync.Mutex
	var seen *tenant.Issued
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	follower := &Service{St: quietStore{shared}, Clock: clk, Log: slog.New(slog.DiscardHandler), Apply: func(is *tenant.Issued) {
		mu.Lock()
		seen = is
		mu.Unlock()
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { follower.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	if _, err := writer.CreateKey(ctx, "a", env, []byte(`{"name":"k","tenant":"cfg-team"}`)); err != nil {
		t.Fatal(err)
	}
	for clk.Waiters() == 0 {
		time.Sleep(time.Millisecond) // until Run waits on its poll timer
	}
	mu.Lock()
	before := seen
	mu.Unlock()
	if before != nil {
		t.Fatal("applied before any poll")
	}
	clk.Advance(PollInterval)
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(time.Millisecond) {
		mu.Lock()
		got := seen
		mu.Unlock()
		if got != nil {
			if len(got.Keys) != 1 {
				t.Fatalf("applied %+v", got)
			}
			return
		}
	}
	t.Fatal("the poll did not apply the change")
}

// TestRedisChangesSurviveIdle: the change subscription outlives idle
// periods longer than the client's command timeout, and signals a change
// made by another client.
func TestRedisChangesSurviveIdle(t *testing.T) {
	rs := redistest.Start(t)
	sub, err := queue.Dial(rs.URL, 20*time.Millisecond, time.Second, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := NewRedis(sub).Changes(ctx)
	time.Sleep(200 * time.Millisecond) // idle for 10 command timeouts (real network reads: no clock to inject)
	pub, err := queue.Dial(rs.URL, time.Second, time.Second, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if _, err := service(NewRedis(pub), nil).CreateTenant(ctx, "a", env, []byte(`{"name":"t"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(2 * time.Second):
		t.Fatal("no change signal after an idle period")
	}
}
