package route

import (
	"sync"
	"sync/atomic"
)

// Busy counts the attempts in flight per provider on this replica, for
// least_busy routing. It is keyed by provider name, so it survives
// reloads; counting is one atomic add, no lock.
type Busy struct {
	counts sync.Map // provider -> *atomic.Int64
}

func (b *Busy) counter(provider string) *atomic.Int64 {
	if v, ok := b.counts.Load(provider); ok {
		return v.(*atomic.Int64)
	}
	v, _ := b.counts.LoadOrStore(provider, new(atomic.Int64))
	return v.(*atomic.Int64)
}

// Begin counts one attempt on provider until the returned func is called
// (once; later calls do nothing). A nil Busy counts nothing.
func (b *Busy) Begin(provider string) (done func()) {
	if b == nil {
		return func() {}
	}
	n := b.counter(provider)
	n.Add(1)
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			n.Add(-1)
		}
	}
}

// InFlight is provider's count of attempts in flight.
func (b *Busy) InFlight(provider string) int64 {
	if b == nil {
		return 0
	}
	if v, ok := b.counts.Load(provider); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}
