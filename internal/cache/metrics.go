package cache

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	lookups      *prometheus.CounterVec
	semanticHits *prometheus.CounterVec
	hitBytes     *prometheus.CounterVec
	stored       *prometheus.CounterVec
	storedBytes  *prometheus.CounterVec
	saved        *prometheus.CounterVec
	errors       *prometheus.CounterVec
}

// Held is a store that can say how many bytes it holds (for the
// switchboard_cache_bytes gauge).
type Held interface {
	Held(ctx context.Context) (int64, error)
}

func newMetrics(reg prometheus.Registerer, st Store) *metrics {
	m := &metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_cache_lookups_total",
			Help: "Requests of cached models by result: hit, miss, bypass (Cache-Control or a sampled request)."}, []string{"model", "result"}),
		semanticHits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_cache_semantic_hits_total",
			Help: "Hits found by the semantic lookup (a subset of the hits)."}, []string{"model"}),
		hitBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_cache_hit_bytes_total",
			Help: "Body bytes replayed from the cache."}, []string{"model"}),
		stored: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_cache_stores_total",
			Help: "Recorded answers by outcome: stored, or why not (too_large, incomplete, truncated, status, error, refused, store_error)."},
			[]string{"model", "outcome"}),
		storedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_cache_stored_bytes_total",
			Help: "Bytes of the entries stored."}, []string{"model"}),
		saved: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_cache_saved_nano_usd_total",
			Help: "What the answers replayed from the cache originally cost, in nano-USD."}, []string{"model"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_cache_errors_total",
			Help: "Cache store, index and embedding failures (each request went on as a miss), by operation."}, []string{"op"}),
	}
	if reg == nil {
		return m
	}
	for _, c := range []**prometheus.CounterVec{&m.lookups, &m.semanticHits, &m.hitBytes, &m.stored, &m.storedBytes, &m.saved, &m.errors} {
		*c = register(reg, *c)
	}
	if h, ok := st.(Held); ok {
		_ = reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchboard_cache_bytes",
			Help: "Bytes the cache store holds, bookkeeping included (-1 when the store cannot be read)."}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			n, err := h.Held(ctx)
			if err != nil {
				return -1
			}
			return float64(n)
		}))
	}
	return m
}

// register adds c to reg, or returns the collector already registered
// under its name (a cache rebuilt on one registry keeps counting).
func register(reg prometheus.Registerer, c *prometheus.CounterVec) *prometheus.CounterVec {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return old
			}
		}
	}
	return c
}
