package config

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Routing policies of a model (models[].routing).
const (
	// RoutingMeasured: the active provider first, then by score or config
	// order (the default).
	RoutingMeasured = "measured"
	// RoutingWeighted: the first provider drawn at random by weight.
	RoutingWeighted = "weighted"
	// RoutingLeastBusy: fewest requests in flight on this replica first.
	RoutingLeastBusy = "least_busy"
	// RoutingLowestCost: the lowest catalog price for the request first.
	RoutingLowestCost = "lowest_cost"
	// RoutingLowestLatency: the lowest measured time to first token first.
	RoutingLowestLatency = "lowest_latency"
)

// RoutingPolicies lists the valid values of models[].routing.
var RoutingPolicies = []string{RoutingMeasured, RoutingWeighted, RoutingLeastBusy, RoutingLowestCost, RoutingLowestLatency}

// Weight bounds of a weighted provider entry.
const (
	DefaultWeight = 1
	MaxWeight     = 1000
)

// Conditions under which a model's fallbacks are tried (fallbacks.on).
const (
	// FallbackError: the providers failed (5xx, timeouts, transport
	// errors, bad answers, the gateway's own provider refusals).
	FallbackError = "error"
	// FallbackContextWindow: the request does not fit the model's context
	// window (estimated before sending, or a provider said so).
	FallbackContextWindow = "context_window"
	// FallbackContentPolicy: a provider refused the content.
	FallbackContentPolicy = "content_policy"
	// FallbackRateLimit: every provider answered 429 (or was paused or
	// at its own limit).
	FallbackRateLimit = "rate_limit"
)

// FallbackConditions lists the valid fallbacks.on values, also the default.
var FallbackConditions = []string{FallbackError, FallbackContextWindow, FallbackContentPolicy, FallbackRateLimit}

// Fallbacks are the models tried, in order, after every provider of a
// model failed with one of the On conditions. YAML: a list of model names
// (fallbacks: [big], every condition) or a mapping
// (fallbacks: {models: [big], on: [context_window]}).
type Fallbacks struct {
	Models []string
	// On defaults to every condition.
	On []string
}

// Covers reports whether the fallbacks apply to condition.
func (f *Fallbacks) Covers(condition string) bool {
	return f != nil && slices.Contains(f.On, condition)
}

// UnmarshalYAML reads a list of model names or a {models, on} mapping.
func (f *Fallbacks) UnmarshalYAML(n *yaml.Node) error {
	n = deref(n)
	names := func(field string, v *yaml.Node) ([]string, error) {
		v = deref(v)
		if v.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("%swant a list of names, got %s", field, describe(v))
		}
		out := make([]string, 0, len(v.Content))
		for _, e := range v.Content {
			e = deref(e)
			if e.Kind != yaml.ScalarNode || e.ShortTag() != "!!str" {
				return nil, fmt.Errorf("%swant names (strings), got %s", field, describe(e))
			}
			out = append(out, e.Value)
		}
		return out, nil
	}
	switch n.Kind {
	case yaml.SequenceNode:
		ms, err := names("", n)
		if err != nil {
			return err
		}
		*f = Fallbacks{Models: ms}
		return nil
	case yaml.MappingNode:
		var out Fallbacks
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := deref(n.Content[i]).Value
			var err error
			switch k {
			case "models":
				out.Models, err = names("models: ", n.Content[i+1])
			case "on":
				out.On, err = names("on: ", n.Content[i+1])
			default:
				err = fmt.Errorf("unknown field %q (known: models, on)", k)
			}
			if err != nil {
				return err
			}
		}
		*f = out
		return nil
	}
	return fmt.Errorf("want a list of model names or {models: [...], on: [...]}, got %s", describe(n))
}

// MarshalYAML writes the mapping form.
func (f Fallbacks) MarshalYAML() (any, error) {
	return map[string][]string{"models": f.Models, "on": f.On}, nil
}

// Policy is the model's routing policy, measured when unset.
func (m *Model) Policy() string {
	if m == nil || m.Routing == "" {
		return RoutingMeasured
	}
	return m.Routing
}

// EntryWeight is a provider entry's weight under routing: weighted.
func (mp *ModelProvider) EntryWeight() int {
	if mp.Weight == nil {
		return DefaultWeight
	}
	return *mp.Weight
}

// routingDefaults gives fallbacks without `on` every condition.
func routingDefaults(c *Config) {
	for _, m := range c.Models {
		if m.Fallbacks != nil && m.Fallbacks.On == nil {
			m.Fallbacks.On = slices.Clone(FallbackConditions)
		}
	}
}

// validateRouting checks one model's routing and weights.
func (l *loader) validateRouting(base string, m *Model) {
	if m.Routing != "" {
		l.oneOf(base+".routing", m.Routing, RoutingPolicies)
	}
	positive := false
	for j, mp := range m.Providers {
		if mp.Weight == nil {
			positive = true // the default weight, 1
			continue
		}
		pb := base + providerPath(j) + ".weight"
		if m.Policy() != RoutingWeighted {
			l.errAt(pb, "only applies with routing: weighted (this model's routing is %s); remove it or set routing: weighted on the model", m.Policy())
			continue
		}
		if l.intRange(pb, int64(*mp.Weight), 0, MaxWeight) && *mp.Weight > 0 {
			positive = true
		}
	}
	if m.Policy() == RoutingWeighted && !positive && len(m.Providers) > 0 {
		l.errAt(base+".providers", "routing: weighted needs at least one provider with a weight above 0")
	}
}

// validateFallbacks checks every model's fallbacks: known models, not
// itself, no repeats, known conditions, and no cycle through other models'
// fallbacks (a -> b -> a would bounce a failing request for ever).
func (l *loader) validateFallbacks(c *Config) {
	index := map[string]int{}
	for i, m := range c.Models {
		if _, dup := index[m.Name]; !dup {
			index[m.Name] = i
		}
	}
	reported := map[string]bool{} // models whose cycle was already reported
	for i, m := range c.Models {
		f := m.Fallbacks
		if f == nil {
			continue
		}
		base := modelPath(i) + ".fallbacks"
		if len(f.Models) == 0 {
			l.errAt(base, "names no model; list the models to fall back to, e.g. fallbacks: [bigger-model]")
		}
		seen := map[string]bool{}
		for _, name := range f.Models {
			switch _, ok := index[name]; {
			case name == m.Name:
				l.errAt(base, "model %q falls back to itself (a fallback cycle)", name)
				reported[name] = true
			case !ok:
				l.errAt(base, "unknown model %q (fallbacks name other entries of models)", name)
			case seen[name]:
				l.errAt(base, "model %q is listed twice", name)
			}
			seen[name] = true
		}
		for _, on := range f.On {
			if !slices.Contains(FallbackConditions, on) {
				l.errAt(base+".on", "must be among %s, got %q", strings.Join(FallbackConditions, ", "), on)
			}
		}
	}
	// Each cycle is reported once, at the first model of it in file order.
	for i, m := range c.Models {
		if m.Fallbacks == nil || reported[m.Name] {
			continue
		}
		if cyc := fallbackCycle(c, index, m.Name); cyc != nil {
			for _, n := range cyc {
				reported[n] = true
			}
			l.errAt(modelPath(i)+".fallbacks", "fallback cycle %s; a model must not be reachable again from its own fallbacks",
				strings.Join(append(cyc, cyc[0]), " -> "))
		}
	}
}

// fallbackCycle returns the models of a cycle through start's fallbacks
// (start first), or nil.
func fallbackCycle(c *Config, index map[string]int, start string) []string {
	var path []string
	on := map[string]bool{}
	done := map[string]bool{}
	var visit func(name string) []string
	visit = func(name string) []string {
		if on[name] {
			if name == start {
				return slices.Clone(path)
			}
			return nil // a cycle not through start: reported at its own model
		}
		if done[name] {
			return nil
		}
		i, ok := index[name]
		if !ok {
			return nil
		}
		on[name] = true
		path = append(path, name)
		if f := c.Models[i].Fallbacks; f != nil {
			for _, next := range f.Models {
				if cyc := visit(next); cyc != nil {
					return cyc
				}
			}
		}
		path = path[:len(path)-1]
		on[name] = false
		done[name] = true
		return nil
	}
	return visit(start)
}
