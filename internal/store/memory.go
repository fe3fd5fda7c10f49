package store

import (
	"container/heap"
	"context"
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
	records map[string]*record
	expiry  expiryHeap
	sweeps  int
}

func newMemLedger() *memLedger {
	return &memLedger{counters: newCounters(), records: map[string]*record{}}
}

func (m *memLedger) begin(context.Context) (ledgerTx, error) { return m, nil }
func (m *memLedger) close() error                            { return nil }

// The memory ledger applies writes at once: a local store only writes
// after every check passed, and these writes cannot fail.
func (m *memLedger) commit() error { return nil }
func (m *memLedger) rollback()     {}

func (m *memLedger) reclaim(now int64, n int) error {
	for i := 0; i < n && len(m.expiry) > 0 && m.expiry[0].at <= now; i++ {
		e := heap.Pop(&m.expiry).(expiryItem)
		if r, ok := m.records[e.id]; ok && r.Expires == e.at {
			delete(m.records, e.id)
		}
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
	m.records[r.ID] = r
	heap.Push(&m.expiry, expiryItem{r.Expires, r.ID})
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
	c[0] += reqs
	c[1] = max(c[1]+toks, 0)
	return nil
}

func (m *counters) addSpend(tenant string, secs, start, reserved, settled int64) error {
	k := windowKey{tenant, secs, start}
	w := m.windows[k]
	if w == nil {
		w = &[2]int64{}
		m.windows[k] = w
	}
	w[0] = max(w[0]+reserved, 0)
	w[1] = max(w[1]+settled, 0)
	return nil
}

func (m *memLedger) update(s *Settlement, expires int64) error {
	r, ok := m.records[s.ID]
	if !ok {
		return nil
	}
	r.State, r.Held, r.Cost = s.State, s.Held, s.Cost
	if s.Tokens != nil {
		t := *s.Tokens
		r.Tokens = &t
	}
	if expires > 0 {
		r.Expires = expires
		heap.Push(&m.expiry, expiryItem{expires, r.ID})
	}
	return nil
}

type expiryItem struct {
	at int64
	id string
}

type expiryHeap []expiryItem

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryItem)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
