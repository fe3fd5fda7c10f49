package admin

import (
	"maps"
	"sync"
)

// memo keeps the last state a store read or wrote. Every change bumps the
// version, so a state whose version is the stored one is the stored
// records: a store then skips reading and decoding every record (at
// 10,000 tenants that was ~100 ms per admin change, and bulk-creating
// keys grew quadratic). States are shared read-only; a change builds a
// new one.
//
// The epoch names one life of the records: Redis restarted without
// persistence counts its versions from 0 again, and its version 57 is not
// the memo's version 57.
type memo struct {
	mu    sync.Mutex
	st    *State
	epoch string
}

// at is the kept state when it is version v of epoch, else nil.
func (m *memo) at(v int64, epoch string) *State {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st != nil && m.st.Version == v && m.epoch == epoch {
		return m.st
	}
	return nil
}

// last is the kept state and its epoch (nil: none yet).
func (m *memo) last() (*State, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st, m.epoch
}

// keep remembers st, the records at its version in epoch. The last read
// wins even when older: a kept state is only ever right or unused.
func (m *memo) keep(st *State, epoch string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st, m.epoch = st, epoch
}

// after is st with ch written, at version v (st itself is left as is).
func (st *State) after(ch *Change, v int64) *State {
	next := &State{Version: v, Keys: maps.Clone(st.Keys), Tenants: maps.Clone(st.Tenants)}
	for _, k := range ch.PutKeys {
		next.Keys[k.ID] = k
	}
	for _, t := range ch.PutTenants {
		next.Tenants[t.Name] = t
	}
	for _, name := range ch.DelTenants {
		delete(next.Tenants, name)
	}
	return next
}
