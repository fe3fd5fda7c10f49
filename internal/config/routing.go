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
	// errors, bad answers, the gateway's own provider refusals other than
	// budget ones).
	FallbackError = "error"
	// FallbackContextWindow: the request does not fit the model's context
	// window (estimated before sending, or a provider said so).
	FallbackContextWindow = "context_window"
	// FallbackContentPolicy: a provider refused the content.
	FallbackContentPolicy = "content_policy"
	// FallbackRateLimit: every provider answered 429 (or was paused or
	// at its own limit).
	FallbackRateLimit = "rate_limit"
	// FallbackBudget: the caller's budget could not take the request on
	// any provider (its reservation exceeds what is left, or its cost
	// cannot be bounded under the budget): another model may be cheaper.
	FallbackBudget = "budget"
)

// FallbackConditions lists the valid fallbacks.on values, also the default.
var FallbackConditions = []string{FallbackError, FallbackContextWindow, FallbackContentPolicy, FallbackRateLimit, FallbackBudget}

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
			case seen[name]:
				l.errAt(base, "model %q is listed twice", name)
			case name == m.Name:
				l.errAt(base, "model %q falls back to itself (a fallback cycle)", name)
			case !ok:
				l.errAt(base, "unknown model %q (fallbacks name other entries of models)", name)
			}
			seen[name] = true
		}
		if f.On != nil && len(f.On) == 0 {
			// on: [] would keep the fallbacks from ever being tried.
			l.errAt(base+".on", "names no condition; list some of %s, or leave on out for all of them", strings.Join(FallbackConditions, ", "))
		}
		for _, on := range f.On {
			if !slices.Contains(FallbackConditions, on) {
				l.errAt(base+".on", "must be among %s, got %q", strings.Join(FallbackConditions, ", "), on)
			}
		}
	}
	// One depth-first walk over every model finds the cycles in time
	// linear in the models and their fallbacks (a walk per model would be
	// quadratic: a chain of thousands of fallbacks took seconds to check,
	// on every reload). Each cycle found is reported once, at its first
	// model in file order; a model naming itself is reported above.
	for _, cyc := range fallbackCycles(c, index) {
		first := slices.MinFunc(cyc, func(a, b string) int { return index[a] - index[b] })
		k := slices.Index(cyc, first)
		cyc = slices.Concat(cyc[k:], cyc[:k], []string{first})
		if len(cyc) > 9 { // a message of bounded length, whatever the cycle
			cyc = slices.Concat(cyc[:4], []string{fmt.Sprintf("(%d more)", len(cyc)-8)}, cyc[len(cyc)-4:])
		}
		l.errAt(modelPath(index[first])+".fallbacks", "fallback cycle %s; a model must not be reachable again from its own fallbacks",
			strings.Join(cyc, " -> "))
	}
}

// maxCycles bounds the cycles fallbackCycles returns: a hostile config
// could hold a cycle per model, each as long as the file.
const maxCycles = 10

// fallbackCycles returns the cycles a depth-first walk of the models'
// fallbacks meets (one per back edge, at most maxCycles; a model naming
// itself is left out), each as the models along it.
func fallbackCycles(c *Config, index map[string]int) [][]string {
	const (
		unseen = iota
		onPath // on the walk's current path
		done   // every model reachable from it was walked
	)
	state := make([]int, len(c.Models))
	at := make([]int, len(c.Models)) // a model's place in path while onPath
	var path []string
	var cycles [][]string
	var visit func(i int)
	visit = func(i int) {
		state[i] = onPath
		at[i] = len(path)
		path = append(path, c.Models[i].Name)
		if f := c.Models[i].Fallbacks; f != nil {
			for _, next := range f.Models {
				j, ok := index[next]
				if !ok || j == i {
					continue
				}
				switch state[j] {
				case unseen:
					visit(j)
				case onPath:
					if len(cycles) < maxCycles {
						cycles = append(cycles, slices.Clone(path[at[j]:]))
					}
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = done
	}
	for i, m := range c.Models {
		if j := index[m.Name]; j == i && state[i] == unseen {
			visit(i)
		}
	}
	return cycles
}
