package tags

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Other is the label value of a metric key's values past its bound.
const Other = "_other"

// Meter counts requests and their cost by the values of a few configured
// tag keys. Its cardinality is bounded twice: only the configured keys
// are labels, and each keeps at most its first N distinct values (the
// rest count as Other), since a value is whatever clients send.
type Meter struct {
	cfg      atomic.Pointer[meterConfig]
	requests *prometheus.CounterVec
	cost     *prometheus.CounterVec
}

type meterConfig struct {
	keys []string
	max  int64
	// seen holds each key's admitted values (a sync.Map per key: a value
	// seen before costs one lock-free lookup) and their count.
	seen  map[string]*sync.Map
	count map[string]*atomic.Int64
}

// NewMeter registers the counters on reg (nil: not registered).
func NewMeter(reg prometheus.Registerer) *Meter {
	m := &Meter{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_tag_requests_total",
			Help: "Requests by the value of each tag key in tags.metric_keys (values past tags.metric_values count as _other)."},
			[]string{"tag", "value"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_tag_cost_nano_usd_total",
			Help: "Settled spend in nano-USD by the value of each tag key in tags.metric_keys."},
			[]string{"tag", "value"}),
	}
	m.cfg.Store(&meterConfig{})
	if reg != nil {
		reg.MustRegister(m.requests, m.cost)
	}
	return m
}

// Configure sets the keys and the bound on values per key (a reload);
// values already counted for a key that stays keep their place.
func (m *Meter) Configure(keys []string, maxValues int) {
	old := m.cfg.Load()
	if slices.Equal(old.keys, keys) && old.max == int64(maxValues) {
		return
	}
	c := &meterConfig{keys: slices.Clone(keys), max: int64(maxValues), seen: map[string]*sync.Map{}, count: map[string]*atomic.Int64{}}
	for _, k := range keys {
		if s, ok := old.seen[k]; ok {
			c.seen[k], c.count[k] = s, old.count[k]
		} else {
			c.seen[k], c.count[k] = &sync.Map{}, &atomic.Int64{}
		}
	}
	m.cfg.Store(c)
}

// Observe counts one request carrying s with its settled cost.
func (m *Meter) Observe(s Set, costNano int64) {
	if m == nil {
		return
	}
	c := m.cfg.Load()
	for _, k := range c.keys {
		v, ok := s.Get(k)
		if !ok {
			continue
		}
		v = c.value(k, v)
		m.requests.WithLabelValues(k, v).Inc()
		if costNano > 0 {
			m.cost.WithLabelValues(k, v).Add(float64(costNano))
		}
	}
}

// value is v, or Other once the key has its bound of other values.
func (c *meterConfig) value(k, v string) string {
	seen := c.seen[k]
	if _, ok := seen.Load(v); ok {
		return v
	}
	if c.count[k].Add(1) > c.max {
		c.count[k].Add(-1)
		return Other
	}
	if _, loaded := seen.LoadOrStore(v, struct{}{}); loaded {
		c.count[k].Add(-1) // another request admitted it first
	}
	return v
}

// Enabled reports whether any key is counted.
func (m *Meter) Enabled() bool { return m != nil && len(m.cfg.Load().keys) > 0 }
