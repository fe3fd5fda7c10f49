package health

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"switchboard/internal/clock"
)

// memShared is a Shared kept in memory, timed by the fake clock, the way
// the Redis backend is timed by Redis TIME.
type memShared struct {
	clk *clock.Fake
	mu  sync.Mutex
	n   int64
	rec map[string]*[3]int64 // stamps of open and close, pause end (µs)
	why map[string]string
	// down makes every call fail.
	down      bool
	published []EventKind
}

func newMemShared(clk *clock.Fake) *memShared {
	return &memShared{clk: clk, rec: map[string]*[3]int64{}, why: map[string]string{}}
}

var errDown = errors.New("down")

func (m *memShared) Publish(_ context.Context, name string, e Event) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return 0, errDown
	}
	now := m.clk.Now().UnixMicro()
	m.n = max(now, m.n+1)
	r := m.rec[name]
	if r == nil {
		r = &[3]int64{}
		m.rec[name] = r
	}
	switch e.Kind {
	case Opened:
		r[0] = m.n
	case Closed:
		r[1] = m.n
	case Paused:
		r[2] = max(r[2], now+e.Pause.Microseconds())
		m.why[name] = e.Reason
	}
	m.published = append(m.published, e.Kind)
	return m.n, nil
}

func (m *memShared) Fetch(_ context.Context, names []string) (map[string]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return nil, errDown
	}
	now := m.clk.Now().UnixMicro()
	out := map[string]Record{}
	for _, n := range names {
		if r := m.rec[n]; r != nil {
			out[n] = Record{Open: r[0], Close: r[1], OpenAge: time.Duration(now-r[0]) * time.Microsecond,
				CloseAge: time.Duration(now-r[1]) * time.Microsecond, PauseLeft: time.Duration(r[2]-now) * time.Microsecond,
				Reason: m.why[n]}
		}
	}
	return out, nil
}

func (m *memShared) events() []EventKind {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]EventKind(nil), m.published...)
}

// eventually advances the fake clock past the refresh interval until cond
// holds (the fetch runs in the background).
func eventually(t *testing.T, clk *clock.Fake, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		clk.Advance(SharedRefresh)
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("condition never held")
}

func TestSharedCircuitOpensAndClosesEverywhere(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	sh := newMemShared(clk)
	set := Settings{Threshold: 2, Window: 10 * time.Second, Cooldown: 30 * time.Second}
	r1, r2 := New(clk, set), New(clk, set)
	r1.SetShared(sh)
	r2.SetShared(sh)
	r2.Available("p") // r2 knows the provider (as after its first request)

	r1.Observe("p", Failure)
	r1.Observe("p", Failure)
	if r1.Available("p") {
		t.Fatal("r1 did not open")
	}
	eventually(t, clk, func() bool { return !r2.Available("p") })
	if !r2.Status("p").CircuitOpen {
		t.Fatal("r2 status not open")
	}
	// Adopting an event again does not restart anything: after the
	// cooldown r2 grants exactly one probe even as refreshes continue.
	clk.Advance(31 * time.Second)
	if !r2.Begin("p", false) {
		t.Fatal("no half-open probe on r2 after the cooldown")
	}
	for range 5 {
		clk.Advance(SharedRefresh)
		r2.Available("p") // refreshes keep seeing r1's opening
		time.Sleep(5 * time.Millisecond)
	}
	if r2.Begin("p", false) {
		t.Fatal("a second probe on r2")
	}
	// r2's probe succeeds: the close reaches r1.
	r2.Observe("p", Success)
	eventually(t, clk, func() bool { return r1.Available("p") && !r1.Status("p").CircuitOpen })
	if got := sh.events(); len(got) != 2 || got[0] != Opened || got[1] != Closed {
		t.Fatalf("published %v, want [opened closed]", got)
	}
}

func TestSharedPauseAndSuccessAfterOpen(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	sh := newMemShared(clk)
	set := Settings{Threshold: 1, Window: 10 * time.Second, Cooldown: 30 * time.Second}
	r1, r2 := New(clk, set), New(clk, set)
	r1.SetShared(sh)
	r2.SetShared(sh)
	r2.Available("q")
	r1.Pause("q", 0, 1, 20*time.Second, ReasonRateLimited)
	eventually(t, clk, func() bool { return !r2.Available("q") })
	if st := r2.Status("q"); st.PauseReason != ReasonRateLimited || st.PausedUntil.IsZero() {
		t.Fatalf("r2 pause %+v", st)
	}
	// A success seen locally after the fleet's opening wins over it.
	r3 := New(clk, set)
	r3.SetShared(sh)
	r1.Observe("z", Failure)
	clk.Advance(time.Second)
	r3.Observe("z", Success)
	for range 5 {
		clk.Advance(SharedRefresh)
		r3.Available("z")
		time.Sleep(5 * time.Millisecond)
	}
	if r3.Status("z").CircuitOpen {
		t.Fatal("r3 adopted an opening older than its own success")
	}
}

// A backend that fails changes nothing: the registry decides alone.
func TestSharedFailsOpen(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	sh := newMemShared(clk)
	sh.down = true
	r := New(clk, Settings{Threshold: 1, Window: time.Second, Cooldown: time.Second})
	r.SetShared(sh)
	if !r.Available("p") {
		t.Fatal("unavailable with a failing backend")
	}
	r.Observe("p", Failure)
	if r.Available("p") {
		t.Fatal("local breaker ignored")
	}
	clk.Advance(time.Second)
	if !r.Begin("p", false) {
		t.Fatal("no probe")
	}
	r.Observe("p", Success)
	if !r.Available("p") {
		t.Fatal("did not close")
	}
}
