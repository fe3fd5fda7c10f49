package store

import (
	"strconv"
	"sync"

	"switchboard/internal/limit"
)

// scriptArgs builds one script call's command line without an allocation
// per argument: integers and strings go in by pointer (an int64 or a
// string stored in an interface is allocated, a pointer is not; go-redis
// writes both kinds), and the slices are reused from a pool. A call's
// scriptArgs goes back to the pool only once its reply was read.
type scriptArgs struct {
	cmd  []any
	ints []int64
	strs []string
}

var argsPool = sync.Pool{New: func() any { return new(scriptArgs) }}

// newArgs starts EVALSHA of s with room for the given numbers of keys,
// integer and string arguments (the slices never grow past that, so the
// pointers taken stay put).
func newArgs(s *script, keys, ints, strs int) *scriptArgs {
	a := argsPool.Get().(*scriptArgs)
	if n := 3 + keys + ints + strs + 16; cap(a.cmd) < n { // 16: flags
		a.cmd = make([]any, 0, n)
	}
	if cap(a.ints) < ints {
		a.ints = make([]int64, 0, ints)
	}
	if cap(a.strs) < keys+strs {
		a.strs = make([]string, 0, keys+strs)
	}
	a.cmd = append(a.cmd, "evalsha", &s.sha, keys)
	return a
}

func (a *scriptArgs) str(v string) {
	a.strs = append(a.strs, v)
	a.cmd = append(a.cmd, &a.strs[len(a.strs)-1])
}

func (a *scriptArgs) int(v int64) {
	a.ints = append(a.ints, v)
	a.cmd = append(a.cmd, &a.ints[len(a.ints)-1])
}

func (a *scriptArgs) flag(b bool) {
	if b {
		a.cmd = append(a.cmd, "1")
	} else {
		a.cmd = append(a.cmd, "0")
	}
}

func (a *scriptArgs) release() {
	clear(a.cmd)
	clear(a.strs)
	a.cmd, a.ints, a.strs = a.cmd[:0], a.ints[:0], a.strs[:0]
	argsPool.Put(a)
}

// maxNames bounds each key-name cache: names come from config (buckets,
// tenants, providers) and the budget windows in use, so a full cache only
// means the next names are built per call again.
const maxNames = 4096

// names caches the Redis key names built from a name (prefix and all), so
// that a decision does not concatenate them on every call.
type names[K comparable] struct {
	mu sync.RWMutex
	m  map[K]string
}

func (n *names[K]) get(k K, build func(K) string) string {
	n.mu.RLock()
	v, ok := n.m[k]
	n.mu.RUnlock()
	if ok {
		return v
	}
	v = build(k)
	n.mu.Lock()
	if n.m == nil || len(n.m) >= maxNames {
		n.m = make(map[K]string) // windows roll over: start again
	}
	n.m[k] = v
	n.mu.Unlock()
	return v
}

// keyNames are a store's caches of key names.
type keyNames struct {
	bucket, sliding, penalty, daily, dailyMinutes, holds, guard names[string]
	window                                                      names[windowKey] // start 0: the prefix
}

func (k *keyNames) bucketKey(n string) string { return k.bucket.get(n, bucketKey) }

// rateKey is rateKey(d), cached.
func (k *keyNames) rateKey(d limit.Debit) string {
	if d.Rate.Sliding {
		return k.sliding.get(d.Key, func(n string) string { return rateKey(limit.Debit{Key: n, Rate: limit.Rate{Sliding: true}}) })
	}
	return k.bucketKey(d.Key)
}
func (k *keyNames) penaltyKey(n string) string { return k.penalty.get(n, penaltyKey) }
func (k *keyNames) dailyKey(t string) string   { return k.daily.get(t, dailyKey) }
func (k *keyNames) holdsKey(t string) string   { return k.holds.get(t, holdsKey) }
func (k *keyNames) guardKey(t string) string   { return k.guard.get(t, guardKey) }
func (k *keyNames) dailyMinutesKey(t string) string {
	return k.dailyMinutes.get(t, dailyMinutesKey)
}

// windowPrefix is windowPrefix(t, secs), cached.
func (k *keyNames) windowPrefix(t string, secs int64) string {
	return k.window.get(windowKey{tenant: t, secs: secs}, func(w windowKey) string { return windowPrefix(w.tenant, w.secs) })
}

// windowKey is one window's full key, cached.
func (k *keyNames) windowKey(t string, secs, start int64) string {
	return k.window.get(windowKey{t, secs, start}, func(w windowKey) string {
		return windowPrefix(w.tenant, w.secs) + ":" + strconv.FormatInt(w.start, 10)
	})
}
