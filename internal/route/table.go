// Package route maps client-facing model names to ordered provider
// candidates. A Table is compiled once per config load and read without
// locks; state that must outlive a reload (provider instances, health,
// samples) is kept by stable provider name elsewhere.
package route

import (
	"encoding/json"
	"net/http"

	"switchboard/internal/config"
	"switchboard/internal/provider"
	"switchboard/internal/spend"
)

// Candidate is one provider entry of a model, ready to send.
type Candidate struct {
	// Provider is the provider's config name: the stable id used for
	// health, metrics and state.
	Provider string
	// Type is the provider's wire protocol (config.TypeOpenAI...).
	Type string
	// Model is the provider's own model name.
	Model string
	// Header is the operator's headers of this entry (the provider's,
	// overridden key by key by the model entry's), canonicalised once at
	// load; they win over a forwarded client header of the same name.
	Header http.Header
	// Primary marks the configured initial choice.
	Primary bool
	// Keys are the provider's API keys, rotated by the attempt loop so
	// that a quota answer pauses one key, not the provider.
	Keys []string
	// RateLimited: the provider has its own rpm/tpm buckets, which an
	// upstream 429 penalises for a few seconds.
	RateLimited bool
	// Send is the provider instance.
	Send provider.Provider
	// ModelJSON is Model as a JSON string and ProviderValue is Provider as
	// a header value, both made once here rather than on every request
	// (nil in hand-built candidates: callers fall back).
	ModelJSON     []byte
	ProviderValue []string
	// Weight is the entry's share under routing: weighted.
	Weight int
	// Price is the catalog's pricing of Model on Provider (the config's
	// pricing over the built-in catalog); nil when unknown.
	Price *spend.Entry
}

// Route is one model's compiled routing.
type Route struct {
	Model *config.Model
	// Candidates in config order.
	Candidates []*Candidate
	// Primary indexes Candidates: the configured initial active provider.
	Primary int
	// Probing, AutoSwitch and ProbeInterval are the model's effective
	// settings (per-model override, else performance.*).
	Probing       bool
	AutoSwitch    bool
	ProbeInterval int
	// Policy is the model's routing policy (config.Routing*).
	Policy string
	// ContextLength is the model's context window in tokens: its
	// context_length, else the largest catalog window of its providers'
	// models when the catalog knows every one; 0 = unknown.
	ContextLength int64
	// ModelValue is Model.Name as a header value, made once (nil in
	// hand-built routes: callers fall back).
	ModelValue []string
}

// Serves reports whether any provider of r can serve ep.
func (r *Route) Serves(ep provider.Endpoint) bool {
	for _, c := range r.Candidates {
		if provider.Serves(c.Send, ep) {
			return true
		}
	}
	return false
}

// Table is the compiled routing of one config snapshot.
type Table struct {
	routes map[string]*Route
	order  []*Route
}

// Builder returns the provider instance for a provider config; the caller
// keeps instances across reloads when a provider's config is unchanged.
type Builder func(*config.Provider) provider.Provider

// Compile builds the routing table of cfg.
func Compile(cfg *config.Config, build Builder) *Table {
	t := &Table{routes: make(map[string]*Route, len(cfg.Models))}
	catalog := spend.New(cfg)
	instances := make(map[string]provider.Provider, len(cfg.Providers))
	for name, pc := range cfg.Providers {
		instances[name] = build(pc)
	}
	for _, m := range cfg.Models {
		r := &Route{Model: m, ModelValue: []string{m.Name}, Primary: m.Primary(), Probing: cfg.ProbingFor(m),
			AutoSwitch: cfg.AutoSwitchFor(m), ProbeInterval: cfg.ProbeIntervalFor(m), Policy: m.Policy()}
		for _, e := range m.Providers {
			pc := cfg.Providers[e.Provider]
			// The provider's headers under the entry's, canonicalised so
			// that a client's copy of either is replaced, never sent too.
			h := make(http.Header, len(pc.Headers)+len(e.Headers))
			for k, v := range pc.Headers {
				h.Set(k, v)
			}
			for k, v := range e.Headers {
				h.Set(k, v)
			}
			r.Candidates = append(r.Candidates, &Candidate{
				Provider:      e.Provider,
				Type:          pc.Type,
				Model:         e.Model,
				Header:        h,
				Primary:       e.Primary,
				Keys:          pc.Keys(),
				RateLimited:   pc.RPM != nil || pc.TPM != nil,
				Send:          instances[e.Provider],
				ModelJSON:     jsonString(e.Model),
				ProviderValue: []string{e.Provider},
				Weight:        e.EntryWeight(),
			})
			if p, ok := catalog.Lookup(e.Provider, e.Model); ok {
				r.Candidates[len(r.Candidates)-1].Price = p
			}
		}
		r.ContextLength = contextLength(m, r.Candidates)
		t.routes[m.Name] = r
		t.order = append(t.order, r)
	}
	return t
}

// contextLength is m's context window: context_length when set, else the
// largest window the catalog knows of its candidates, when it knows every
// one (a provider of unknown window might take any size); 0 = unknown.
func contextLength(m *config.Model, cs []*Candidate) int64 {
	if m.ContextLength > 0 {
		return int64(m.ContextLength)
	}
	var most int64
	for _, c := range cs {
		if c.Price == nil || c.Price.Context <= 0 {
			return 0
		}
		most = max(most, c.Price.Context)
	}
	return most
}

func jsonString(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// Lookup finds a model's route; nil when the model is not configured.
func (t *Table) Lookup(model string) *Route { return t.routes[model] }

// Routes lists every route in config order.
func (t *Table) Routes() []*Route { return t.order }
