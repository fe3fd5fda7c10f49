package store

import (
	"container/heap"
	"context"
	"time"
)

// NewMemory returns a Store that keeps everything in the process: state
// survives config reloads but not a restart.
func NewMemory() Store { return newLocal(newMemLedger()) }

type windowKey struct {
	tenant      string
	secs, start int64
}

// counters are the rolling-day minutes and spend windows in memory: all
// of a memory ledger's, and the SQLite ledger's cache of its own tables.
type counters struct {
	minutes map[string]map[int64]*[2]int64 // tenant → minute → {requests, tokens}
	windows map[windowKey]*[2]int64        // → {reserved, settled}
}

func newCounters() counters {
	return counters{minutes: map[string]map[int64]*[2]int64{}, windows: map[windowKey]*[2]int64{}}
}

type memLedger struct {
	counters
	records map[string]*expiryItem
	expiry  expiryHeap
	sweeps  int
	ids     *guardRing
}

func newMemLedger() *memLedger {
	return &memLedger{counters: newCounters(), records: map[string]*expiryItem{}, ids: newGuardRing(MaxGuard)}
}

func (m *memLedger) begin(context.Context) (ledgerTx, error) { return m, nil }
func (m *memLedger) close() error                            { return nil }

// The memory ledger applies writes at once: a local store only writes
// after every check passed, and these writes cannot fail.
func (m *memLedger) commit(bool) error { return nil }
func (m *memLedger) rollback()         {}

func (m *memLedger) reclaim(now int64, n int) error {
	for i := 0; i < n && len(m.expiry) > 0 && m.expiry[0].r.Expires <= now; i++ {
		e := heap.Pop(&m.expiry).(*expiryItem)
		delete(m.records, e.r.ID)
	}
	// Windows long over are dropped now and then.
	if m.sweeps++; m.sweeps%4096 == 0 {
		m.pruneWindows(now)
	}
	return nil
}

// pruneWindows drops windows over for two days (as the SQLite ledger's
// pruning does).
func (c *counters) pruneWindows(now int64) {
	for k := range c.windows {
		if k.start+k.secs+2*86400 < now {
			delete(c.windows, k)
		}
	}
}

func (m *memLedger) retained() int { return len(m.records) }

func (m *counters) daily(tenant string, from int64) (reqs, toks, oldest int64, err error) {
	for min, c := range m.minutes[tenant] {
		if min <= from {
			delete(m.minutes[tenant], min)
			continue
		}
		reqs += c[0]
		toks += c[1]
		if oldest == 0 || min < oldest {
			oldest = min
		}
	}
	return reqs, toks, oldest, nil
}

func (m *counters) window(tenant string, secs, start int64) (int64, int64, error) {
	if w := m.windows[windowKey{tenant, secs, start}]; w != nil {
		return w[0], w[1], nil
	}
	return 0, 0, nil
}

func (m *memLedger) insert(r *record) error {
	e := &expiryItem{r: r}
	m.records[r.ID] = e
	heap.Push(&m.expiry, e)
	return nil
}

func (m *counters) addUsage(tenant string, minute, reqs, toks, floor int64) error {
	if minute <= floor {
		return nil
	}
	t := m.minutes[tenant]
	if t == nil {
		t = map[int64]*[2]int64{}
		m.minutes[tenant] = t
	}
	c := t[minute]
	if c == nil {
		c = &[2]int64{}
		t[minute] = c
	}
	c[0] = min(max(c[0]+reqs, 0), maxTotal)
	c[1] = min(max(c[1]+toks, 0), maxTotal)
	return nil
}

func (m *counters) addSpend(tenant string, secs, start, reserved, settled int64) error {
	k := windowKey{tenant, secs, start}
	w := m.windows[k]
	if w == nil {
		w = &[2]int64{}
		m.windows[k] = w
	}
	// Bounded (the SQLite ledger refuses a file past maxTotal): a total
	// never wraps, whatever the deltas.
	w[0] = min(max(w[0]+reserved, 0), maxTotal)
	w[1] = min(max(w[1]+settled, 0), maxTotal)
	return nil
}

func (m *memLedger) live(id string, end bool) (bool, error) {
	e, ok := m.records[id]
	if ok && end {
		delete(m.records, id)
		heap.Remove(&m.expiry, e.i)
	}
	return ok, nil
}

func (m *memLedger) guard(id string, now int64, add bool) (bool, error) {
	return m.ids.seen(id, now, add), nil
}

// guardRing is the duplicate-settlement guard in memory: the ids of the
// last cap final settlements without a live hold, each for GuardTTL.
// The ring bounds it: the oldest id is forgotten when a new one comes.
type guardRing struct {
	until map[string]int64 // id → Unix s until which it is remembered
	ring  []guardEntry     // grows to max, then wraps
	max   int
	next  int
}

type guardEntry struct {
	id    string
	until int64
}

func newGuardRing(n int) *guardRing {
	return &guardRing{until: make(map[string]int64), max: n}
}

func (g *guardRing) seen(id string, now int64, add bool) bool {
	if u, ok := g.until[id]; ok && u > now {
		return true
	}
	if add {
		u := now + int64(GuardTTL/time.Second)
		if len(g.ring) < g.max {
			g.ring = append(g.ring, guardEntry{id, u})
		} else {
			// The slot's id is forgotten unless it was remembered again
			// since (a later slot holds it then).
			if old := g.ring[g.next]; g.until[old.id] == old.until {
				delete(g.until, old.id)
			}
			g.ring[g.next] = guardEntry{id, u}
			g.next = (g.next + 1) % g.max
		}
		g.until[id] = u
	}
	return false
}

// expiryItem is a live hold in the expiry heap; i is its index there, so
// that a hold ended by its settlement leaves the heap at once.
type expiryItem struct {
	r *record
	i int
	// stored: the hold is in the SQLite ledger's holds table.
	stored bool
}

type expiryHeap []*expiryItem

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].r.Expires < h[j].r.Expires }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}
func (h *expiryHeap) Push(x any) {
	e := x.(*expiryItem)
	e.i = len(*h)
	*h = append(*h, e)
}
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return x
}
