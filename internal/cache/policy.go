package cache

import "switchboard/internal/config"

// Compile turns cfg's cache settings into one Policy per cached model
// (models whose cache is off are absent). A model with its own max_bytes
// gets a partition of its own; the others share the global budget.
func Compile(cfg *config.Config) map[string]*Policy {
	out := map[string]*Policy{}
	for _, m := range cfg.Models {
		r, on := cfg.CacheFor(m)
		if !on {
			continue
		}
		p := &Policy{Bounds: Bounds{MaxBytes: r.MaxBytes, TTL: r.TTL}, MaxEntry: r.MaxEntryBytes, Global: r.Global,
			Sampled: r.Sampled, Timeout: r.Timeout}
		if r.Own {
			p.Partition = "m:" + m.Name
		}
		if s := r.Semantic; s != nil {
			p.Semantic = &Semantic{Model: s.EmbeddingModel, Threshold: *s.Threshold, Timeout: s.Timeout.D()}
		}
		out[m.Name] = p
	}
	return out
}
