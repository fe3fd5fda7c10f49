package cache

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// itemOverhead is what one entry costs the memory store beyond its own
// bytes (map slot, list element, key string, headers map): counted
// against the budget, so that a flood of tiny answers stays within it too.
const itemOverhead = 256

// Memory is the in-process store: one LRU list per partition, evicting
// the least recently used entries until the partition's bytes fit its
// budget. Entries past their TTL are dropped when touched or evicted.
type Memory struct {
	now   func() time.Time
	mu    sync.Mutex
	items map[string]*list.Element
	parts map[string]*memPart
	total int64
}

type memPart struct {
	lru   list.List // front: most recently used
	bytes int64
}

type memItem struct {
	key, part string
	e         *Entry
	size      int64
	expires   time.Time
}

// NewMemory returns an empty store; now is its clock (nil: time.Now).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, items: map[string]*list.Element{}, parts: map[string]*memPart{}}
}

// Get returns the entry under key, nil when there is none (or it expired).
func (m *Memory) Get(_ context.Context, key, _ string) (*Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	el := m.items[key]
	if el == nil {
		return nil, nil
	}
	it := el.Value.(*memItem)
	if !m.now().Before(it.expires) {
		m.remove(el)
		return nil, nil
	}
	m.parts[it.part].lru.MoveToFront(el)
	return it.e, nil
}

// Put stores e under key, evicting the partition's least recently used
// entries until it fits; false when e alone is over the budget.
func (m *Memory) Put(_ context.Context, key string, e *Entry, b Bounds) (bool, error) {
	size := e.Size() + int64(len(key)) + itemOverhead
	if size > b.MaxBytes {
		return false, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if el := m.items[key]; el != nil {
		m.remove(el)
	}
	p := m.parts[b.Partition]
	if p == nil {
		p = &memPart{}
		m.parts[b.Partition] = p
	}
	for p.bytes+size > b.MaxBytes {
		m.remove(p.lru.Back())
	}
	it := &memItem{key: key, part: b.Partition, e: e, size: size, expires: m.now().Add(b.TTL)}
	m.items[key] = p.lru.PushFront(it)
	p.bytes += size
	m.total += size
	return true, nil
}

func (m *Memory) remove(el *list.Element) {
	it := el.Value.(*memItem)
	p := m.parts[it.part]
	p.lru.Remove(el)
	p.bytes -= it.size
	m.total -= it.size
	delete(m.items, it.key)
	if p.lru.Len() == 0 {
		delete(m.parts, it.part)
	}
}

// Bytes is what the store holds now, overhead included.
func (m *Memory) Bytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total
}

// Len is the number of entries held.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.items)
}

// Close implements Store.
func (m *Memory) Close() error { return nil }

// Held implements Held.
func (m *Memory) Held(context.Context) (int64, error) { return m.Bytes(), nil }
