package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Hedge starts an extra attempt on the model's next provider when the
// running one is slow to answer (no first token of a stream, no response
// headers of a unary call): the first of them to commit serves the
// client, the other is canceled at once. Set globally (hedge:) and per
// model (models[].hedge:, which wins); off by default.
type Hedge struct {
	// After is the delay before an extra attempt: pNN (p50..p99), that
	// percentile of the running provider's measured TTFT over
	// performance.sample_window (no hedge until it has 5 samples), or a
	// fixed duration, 1 ms..1 h. Required.
	After HedgeDelay `yaml:"after"`
	// MaxExtra is how many extra attempts one request may start, each one
	// delay after the previous. Default 1, range 0..3 (0 = off, e.g. to
	// exempt one model from a global hedge).
	MaxExtra *int `yaml:"max_extra"`
}

// HedgeDelay is a hedge's delay: a TTFT percentile or a fixed duration.
type HedgeDelay struct {
	// Percentile is 50..99 for pNN; 0 when Fixed is the delay.
	Percentile int
	Fixed      Duration
}

// Bounds of hedge settings.
const (
	minHedgePercentile = 50
	maxHedgePercentile = 99
	maxHedgeExtra      = 3
	minHedgeDelay      = time.Millisecond
	maxHedgeDelay      = time.Hour
)

// UnmarshalYAML accepts pNN or seconds or a duration as Duration does.
// Ranges are checked by validation, which names the field.
func (h *HedgeDelay) UnmarshalYAML(n *yaml.Node) error {
	n = deref(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		s := strings.TrimSpace(n.Value)
		if len(s) > 1 && (s[0] == 'p' || s[0] == 'P') {
			q, err := strconv.Atoi(s[1:])
			if err != nil {
				return fmt.Errorf("want a percentile p50..p99 or a duration such as \"800ms\", got %q", n.Value)
			}
			*h = HedgeDelay{Percentile: q}
			if q == 0 {
				h.Percentile = -1 // p0: out of range, not "fixed"
			}
			return nil
		}
	}
	d, err := parseDuration(n)
	if err != nil {
		return fmt.Errorf("want a percentile p50..p99 or a duration such as \"800ms\", got %s", err)
	}
	*h = HedgeDelay{Fixed: d}
	return nil
}

// MarshalYAML writes pNN or the duration, mirroring UnmarshalYAML.
func (h HedgeDelay) MarshalYAML() (any, error) {
	if h.Percentile != 0 {
		return "p" + strconv.Itoa(h.Percentile), nil
	}
	return h.Fixed.MarshalYAML()
}

// HedgeFor returns the hedge settings of m (its own, else the global
// ones) and whether hedging is on for it. m may be nil.
func (c *Config) HedgeFor(m *Model) (h Hedge, on bool) {
	hp := c.Hedge
	if m != nil && m.Hedge != nil {
		hp = m.Hedge
	}
	if hp == nil {
		return Hedge{}, false
	}
	h = *hp
	if h.MaxExtra == nil {
		one := 1
		h.MaxExtra = &one
	}
	return h, *h.MaxExtra > 0
}

// validateHedge checks one hedge section at path.
func (l *loader) validateHedge(path string, h *Hedge) {
	if h == nil {
		return
	}
	switch a := h.After; {
	case !l.has(path + ".after"):
		l.errAt(path+".after", "required: a percentile p50..p99 of the measured TTFT, or a duration such as \"800ms\"")
	case a.Percentile != 0:
		if a.Percentile < minHedgePercentile || a.Percentile > maxHedgePercentile {
			l.errAt(path+".after", "percentile must be between p%d and p%d, got p%d", minHedgePercentile, maxHedgePercentile, max(a.Percentile, 0))
		}
	default:
		l.durRange(path+".after", a.Fixed, minHedgeDelay, maxHedgeDelay)
	}
	if h.MaxExtra != nil {
		l.intRange(path+".max_extra", int64(*h.MaxExtra), 0, maxHedgeExtra)
	}
}
