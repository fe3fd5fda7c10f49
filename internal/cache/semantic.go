package cache

import (
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"sync"
	"time"
)

// The semantic cache answers a question with the stored answer of the
// most similar earlier one: the last user message is embedded, and the
// nearest stored vector of the same group (scope, protocol, model, stream
// and every other field of the request: the conversation before it, the
// system prompt, tools and parameters) above the threshold names the
// entry to replay. Risks (docs/cache.md): a near-miss prompt ("capital of
// Austria" and "capital of Australia" embed close) gets the other's
// answer; and the threshold is a property of the embedding model, not a
// universal constant.

// Bounds of the semantic index.
const (
	// MaxGroupVectors bounds one group's vectors: a lookup compares the
	// query with all of them (and, in Redis, reads them all).
	MaxGroupVectors = 256
	// MaxDims bounds an embedding's dimensions.
	MaxDims = 8192
)

// Index holds the semantic cache's vectors. Implementations bound the
// vectors they keep (MaxGroupVectors per group and a total) and forget
// them after their TTL.
type Index interface {
	// Nearest returns the key of the vector of group most similar to vec
	// (unit length) with a similarity of at least min, or "".
	Nearest(ctx context.Context, group string, vec []float32, min float64) (key string, score float64, err error)
	// Add records vec (unit length) for key in group.
	Add(ctx context.Context, group, key string, vec []float32, ttl time.Duration) error
	// Forget drops key from group (its entry is gone).
	Forget(ctx context.Context, group, key string) error
}

var errBadVector = errors.New("cache: the embedding is empty, too long or not finite")

// normalize returns vec scaled to unit length, or an error for a vector
// that cannot be compared.
func normalize(vec []float64) ([]float32, error) {
	if len(vec) == 0 || len(vec) > MaxDims {
		return nil, errBadVector
	}
	var n float64
	for _, x := range vec {
		n += x * x
	}
	n = math.Sqrt(n)
	if n == 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return nil, errBadVector
	}
	out := make([]float32, len(vec))
	for i, x := range vec {
		out[i] = float32(x / n)
	}
	return out, nil
}

// similarity is the cosine of two unit vectors (0 when their dimensions
// differ: another embedding model wrote one).
func similarity(a, b []float32) float64 {
	if len(a) != len(b) {
		return 0
	}
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func packVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func unpackVector(b []byte) []float32 {
	if len(b)%4 != 0 || len(b)/4 > MaxDims {
		return nil
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// MemoryIndex keeps vectors in the process: at most max in all, the
// oldest dropped first, and MaxGroupVectors per group.
type MemoryIndex struct {
	now    func() time.Time
	max    int
	mu     sync.Mutex
	all    list.List // of *vecItem, oldest at the back
	groups map[string]*list.List
}

type vecItem struct {
	group, key string
	vec        []float32
	expires    time.Time
	all, grp   *list.Element
}

// NewMemoryIndex keeps at most max vectors; now is its clock (nil:
// time.Now).
func NewMemoryIndex(max int, now func() time.Time) *MemoryIndex {
	if now == nil {
		now = time.Now
	}
	return &MemoryIndex{now: now, max: max, groups: map[string]*list.List{}}
}

// Nearest implements Index.
func (x *MemoryIndex) Nearest(_ context.Context, group string, vec []float32, min float64) (string, float64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	g := x.groups[group]
	if g == nil {
		return "", 0, nil
	}
	now := x.now()
	best, score := "", min
	for el := g.Front(); el != nil; {
		it := el.Value.(*vecItem)
		el = el.Next()
		if !now.Before(it.expires) {
			x.remove(it)
			continue
		}
		if s := similarity(vec, it.vec); s >= score {
			best, score = it.key, s
		}
	}
	if best == "" {
		return "", 0, nil
	}
	return best, score, nil
}

// Add implements Index.
func (x *MemoryIndex) Add(_ context.Context, group, key string, vec []float32, ttl time.Duration) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	g := x.groups[group]
	if g == nil {
		g = &list.List{}
		x.groups[group] = g
	}
	for el := g.Front(); el != nil; el = el.Next() {
		if it := el.Value.(*vecItem); it.key == key {
			x.remove(it)
			break
		}
	}
	it := &vecItem{group: group, key: key, vec: vec, expires: x.now().Add(ttl)}
	it.all = x.all.PushFront(it)
	it.grp = g.PushFront(it)
	for g.Len() > MaxGroupVectors {
		x.remove(g.Back().Value.(*vecItem))
	}
	for x.all.Len() > x.max {
		x.remove(x.all.Back().Value.(*vecItem))
	}
	return nil
}

// Forget implements Index.
func (x *MemoryIndex) Forget(_ context.Context, group, key string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if g := x.groups[group]; g != nil {
		for el := g.Front(); el != nil; el = el.Next() {
			if it := el.Value.(*vecItem); it.key == key {
				x.remove(it)
				break
			}
		}
	}
	return nil
}

func (x *MemoryIndex) remove(it *vecItem) {
	x.all.Remove(it.all)
	g := x.groups[it.group]
	g.Remove(it.grp)
	if g.Len() == 0 {
		delete(x.groups, it.group)
	}
}

// Len is the number of vectors held.
func (x *MemoryIndex) Len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.all.Len()
}
