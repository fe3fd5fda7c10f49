// Package cache is the response cache: an answer paid for once is replayed
// to the same question, without a provider call and without spend.
//
// The idea in one place: a request's key is a hash of its canonical form
// (protocol, model, stream, the headers that change the answer, and every
// body field that does, with field order, whitespace, string escapes and
// number spellings ignored), scoped to the tenant unless the model's
// cache.scope is global. An entry is the answer as its client received
// it: status, the headers worth keeping and the body, or a stream's bytes
// cut where they were flushed, so a replay keeps the original chunking,
// in the client's protocol (the protocol is part of the key). Only an
// answer that ended naturally and reached its client whole is stored
// (finished.go); one over the entry bound is not recorded further.
//
// Handlers call Lookup with their protocol's Request; a hit is replayed, a
// miss is served through the Recorder that Lookup hands out and then
// Finish stores it. Stores (memory, SQLite, Redis) bound bytes per
// partition by evicting the least recently used entries and expire
// entries after their TTL; every call has a deadline, and a store that is
// down or slow makes the request a miss, never an error. The semantic
// cache (semantic.go) is an optional second lookup by meaning.
package cache

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"switchboard/internal/clock"
)

// Store keeps entries.
type Store interface {
	// Get returns the entry under key (stored in partition), nil when
	// there is none or it expired.
	Get(ctx context.Context, key, partition string) (*Entry, error)
	// Put stores e under key within b; false when a bound refused it.
	Put(ctx context.Context, key string, e *Entry, b Bounds) (bool, error)
	Close() error
}

// Bounds are where an entry goes and how long it stays.
type Bounds struct {
	// Partition names the byte budget the entry counts against: "" for
	// the global cache.max_bytes, a model's name when it has its own.
	Partition string
	// MaxBytes is the partition's budget.
	MaxBytes int64
	TTL      time.Duration
}

// Policy is one model's cache settings, compiled from the config.
type Policy struct {
	Bounds
	// MaxEntry bounds one recorded answer (bytes); larger ones are not
	// stored.
	MaxEntry int64
	// Global: entries are shared by every tenant (cache.scope: global).
	Global bool
	// Sampled: answers to requests with a temperature above 0 are cached
	// too (cache.sampled).
	Sampled bool
	// Semantic, when set, adds the lookup by meaning.
	Semantic *Semantic
	// Timeout bounds each store and index call (0: the cache's default).
	Timeout time.Duration
}

// deadline is p's bound on one store call.
func (c *Cache) deadline(p *Policy) time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return c.timeout
}

// Semantic configures the semantic lookup of one model.
type Semantic struct {
	// Model is the gateway model that embeds the last user message.
	Model string
	// Threshold is the least cosine similarity of a hit.
	Threshold float64
	// Timeout bounds the embedding call.
	Timeout time.Duration
}

// Embedder embeds text through one of the gateway's own models (the call
// is routed, admitted and metered as any request of the caller).
type Embedder func(ctx context.Context, model, text string) ([]float64, error)

// Results of a lookup (the X-Switchboard-Cache header's values).
const (
	Hit    = "hit"
	Miss   = "miss"
	Bypass = "bypass"
)

// Options configure a Cache.
type Options struct {
	Store Store
	// Index holds the semantic vectors (nil: no semantic lookups).
	Index Index
	// Timeout bounds each store and index call (default 100 ms).
	Timeout time.Duration
	Clock   clock.Clock
	Log     *slog.Logger
	// Registerer receives the cache's collectors (nil: none).
	Registerer prometheus.Registerer
}

// Cache looks answers up and stores them.
type Cache struct {
	st      Store
	idx     Index
	timeout time.Duration
	clk     clock.Clock
	log     *slog.Logger
	m       *metrics
	// warned is when a store error was last logged (Unix ns): one line
	// per 10 s, the metric counts them all.
	warned atomic.Int64
}

// New builds a cache over o.Store.
func New(o Options) *Cache {
	if o.Timeout <= 0 {
		o.Timeout = 100 * time.Millisecond
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	c := &Cache{st: o.Store, idx: o.Index, timeout: o.Timeout, clk: o.Clock, log: o.Log}
	c.m = newMetrics(o.Registerer, o.Store)
	return c
}

// Store is the cache's store.
func (c *Cache) Store() Store { return c.st }

// Lookup is one request's verdict.
type Lookup struct {
	// Result is Hit, Miss or Bypass.
	Result string
	// Reason says why a request bypassed the cache: no-store, no-cache
	// or sampled.
	Reason string
	// Entry and Age are the hit's answer and how long ago it was stored.
	Entry *Entry
	Age   time.Duration
	// Similarity is a semantic hit's score (0 for an exact hit).
	Similarity float64

	c      *Cache
	p      *Policy
	req    *Request
	key    string
	store  bool
	group  string
	vector []float32
}

// directives reads the request's Cache-Control: no-store (neither read
// nor store), no-cache (do not read, may store) and max-age=N (accept an
// entry at most N seconds old; max-age=0 is no-cache).
func directives(h map[string][]string) (noStore, noCache bool, maxAge time.Duration) {
	maxAge = -1
	for _, v := range h["Cache-Control"] {
		for _, d := range strings.Split(v, ",") {
			d = strings.ToLower(strings.TrimSpace(d))
			switch {
			case d == "no-store":
				noStore = true
			case d == "no-cache":
				noCache = true
			case strings.HasPrefix(d, "max-age="):
				if n, err := strconv.ParseInt(strings.Trim(d[len("max-age="):], `"`), 10, 64); err == nil && n >= 0 {
					maxAge = time.Duration(min(n, 1<<32)) * time.Second
				}
			}
		}
	}
	if maxAge == 0 {
		noCache = true
	}
	return noStore, noCache, maxAge
}

// Lookup decides r under p: a hit (with its entry), a miss (the answer
// may be stored: serve through Recorder, then Finish) or a bypass. embed
// serves the semantic lookup (nil: exact only). It never fails: a store
// that errs or is slow is a miss.
func (c *Cache) Lookup(ctx context.Context, p *Policy, r *Request, embed Embedder) *Lookup {
	l := &Lookup{c: c, p: p, req: r, Result: Miss}
	noStore, noCache, maxAge := directives(r.Header)
	switch {
	case noStore:
		l.Result, l.Reason = Bypass, "no-store"
		c.m.lookups.WithLabelValues(r.Model, Bypass).Inc()
		return l
	case !p.Sampled && r.Sampled():
		l.Result, l.Reason = Bypass, "sampled"
		c.m.lookups.WithLabelValues(r.Model, Bypass).Inc()
		return l
	}
	l.store = true
	l.key = r.key(p.Global, "")
	if noCache {
		l.Result, l.Reason = Bypass, "no-cache"
		c.m.lookups.WithLabelValues(r.Model, Bypass).Inc()
		return l
	}
	if e := c.get(ctx, p, l.key, maxAge); e != nil {
		l.hit(e, 0)
		c.m.lookups.WithLabelValues(r.Model, Hit).Inc()
		return l
	}
	if p.Semantic != nil && embed != nil && c.idx != nil {
		c.semantic(ctx, l, embed, maxAge)
	}
	c.m.lookups.WithLabelValues(r.Model, l.Result).Inc()
	return l
}

func (l *Lookup) hit(e *Entry, sim float64) {
	l.Result, l.Entry, l.Similarity, l.store = Hit, e, sim, false
	l.Age = max(l.c.clk.Now().Sub(e.Stored), 0)
	if sim > 0 {
		l.c.m.semanticHits.WithLabelValues(l.req.Model).Inc()
	}
}

// get reads key within the deadline; nil on a miss, an error, a stale
// entry or one older than maxAge (-1: any age).
func (c *Cache) get(ctx context.Context, p *Policy, key string, maxAge time.Duration) *Entry {
	ctx, cancel := context.WithTimeout(ctx, c.deadline(p))
	defer cancel()
	e, err := c.st.Get(ctx, key, p.Partition)
	if err != nil {
		c.failed("get", err)
		return nil
	}
	if e == nil || maxAge >= 0 && c.clk.Now().Sub(e.Stored) > maxAge {
		return nil
	}
	return e
}

// semantic looks the request up by the meaning of its last user message.
func (c *Cache) semantic(ctx context.Context, l *Lookup, embed Embedder, maxAge time.Duration) {
	text, path, ok := l.req.lastUser()
	if !ok {
		return
	}
	s := l.p.Semantic
	ectx, cancel := context.WithTimeout(ctx, s.Timeout)
	raw, err := embed(ectx, s.Model, text)
	cancel()
	if err != nil {
		c.failed("embed", err)
		return
	}
	vec, err := normalize(raw)
	if err != nil {
		c.failed("embed", err)
		return
	}
	l.group, l.vector = l.req.key(l.p.Global, path), vec
	ictx, icancel := context.WithTimeout(ctx, c.deadline(l.p))
	key, score, err := c.idx.Nearest(ictx, l.group, vec, s.Threshold)
	icancel()
	if err != nil {
		c.failed("index", err)
		return
	}
	if key == "" {
		return
	}
	if e := c.get(ctx, l.p, key, maxAge); e != nil {
		l.hit(e, score)
		return
	}
	// The vector outlived its entry (evicted or expired): forget it.
	fctx, fcancel := context.WithTimeout(ctx, c.deadline(l.p))
	_ = c.idx.Forget(fctx, l.group, key)
	fcancel()
}

// Recorder wraps w to record the answer when it may be stored (nil when
// it may not: a hit, no-store, a sampled request).
func (l *Lookup) Recorder(w http.ResponseWriter) *Recorder {
	if !l.store {
		return nil
	}
	return NewRecorder(w, l.p.MaxEntry)
}

// Finish stores what rec recorded, if it is a complete answer, within the
// deadline; the client already has it. ctx may be the request's (a client
// that has left cancels nothing here).
func (l *Lookup) Finish(ctx context.Context, rec *Recorder) {
	if rec == nil {
		return
	}
	c, model := l.c, l.req.Model
	e, why := rec.entry(l.req.Protocol, l.req.Stream)
	if e == nil {
		c.m.stored.WithLabelValues(model, why).Inc()
		return
	}
	e.Stored = c.clk.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.deadline(l.p))
	defer cancel()
	ok, err := c.st.Put(ctx, l.key, e, l.p.Bounds)
	switch {
	case err != nil:
		c.failed("put", err)
		c.m.stored.WithLabelValues(model, "store_error").Inc()
		return
	case !ok:
		c.m.stored.WithLabelValues(model, "refused").Inc()
		return
	}
	c.m.stored.WithLabelValues(model, "stored").Inc()
	c.m.storedBytes.WithLabelValues(model).Add(float64(e.Size()))
	if l.vector != nil {
		if err := c.idx.Add(ctx, l.group, l.key, l.vector, l.p.TTL); err != nil {
			c.failed("index", err)
		}
	}
}

// Served counts a replayed hit: its bytes and what it saved.
func (c *Cache) Served(model string, e *Entry) {
	n := 0
	for _, ch := range e.Chunks {
		n += len(ch)
	}
	c.m.hitBytes.WithLabelValues(model).Add(float64(n))
	if e.Priced && e.CostNano > 0 {
		c.m.saved.WithLabelValues(model).Add(float64(e.CostNano))
	}
}

// failed counts a store, index or embedding error and logs it (at most
// once per 10 s): the request goes on as a miss.
func (c *Cache) failed(op string, err error) {
	c.m.errors.WithLabelValues(op).Inc()
	now := c.clk.Now().UnixNano()
	if last := c.warned.Load(); now-last >= int64(10*time.Second) && c.warned.CompareAndSwap(last, now) {
		c.log.Warn("response cache unavailable; serving as a miss", "op", op, "error", err.Error())
	}
}
