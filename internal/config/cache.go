package config

import "time"

// Cache configures the response cache (docs/cache.md): an answer paid
// for once is replayed to the same question. The global cache: section
// holds where entries live and the defaults; models[].cache overrides the
// per-model fields for one model (and turns the cache on for it unless it
// says enabled: false). Off by default.
type Cache struct {
	// Enabled: global: every model caches (default false); per model:
	// default true once the model has a cache: section.
	Enabled *bool `yaml:"enabled"`
	// TTL keeps an entry. Default 1 h, range 1 s..30 d.
	TTL Duration `yaml:"ttl"`
	// MaxBytes is the byte budget, least recently used entries evicted
	// first: global: every model's entries without a budget of their own
	// (default 256 MiB); per model: the model's own budget (default: it
	// shares the global one). Range 1 MiB..64 GiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxEntryBytes bounds one answer; a larger one is not stored.
	// Default 1 MiB, range 1 KiB..64 MiB, at most max_bytes.
	MaxEntryBytes int64 `yaml:"max_entry_bytes"`
	// Scope: tenant (default: a tenant only ever gets its own answers) or
	// global (every tenant shares them; the operator's choice).
	Scope string `yaml:"scope"`
	// Sampled caches answers to requests with a temperature above 0 (or
	// none: the protocols' default is 1). Default false.
	Sampled *bool `yaml:"sampled"`
	// Semantic adds the lookup by meaning; nil = off.
	Semantic *SemanticCache `yaml:"semantic"`

	// Store (global only): auto (default: redis with redis.url, else
	// sqlite with store.backend sqlite, else memory), memory, sqlite or
	// redis.
	Store string `yaml:"store"`
	// Path (global only) of the SQLite file. Default STATE_DIR/cache.db.
	Path string `yaml:"path"`
	// Timeout (global only) bounds each store call; a slower store is a
	// miss. Default 100 ms, range 1 ms..10 s.
	Timeout Duration `yaml:"timeout"`
}

// SemanticCache configures the semantic lookup.
type SemanticCache struct {
	// EmbeddingModel is a gateway model that serves /v1/embeddings; the
	// last user message is embedded through it. Required.
	EmbeddingModel string `yaml:"embedding_model"`
	// Threshold is the least cosine similarity of a hit. Default 0.95,
	// range 0.5..1.
	Threshold *float64 `yaml:"threshold"`
	// Timeout bounds the embedding call (then the lookup is exact only).
	// Default 5 s, range 100 ms..60 s.
	Timeout Duration `yaml:"timeout"`
	// MaxEntries (global only) bounds the vectors kept. Default 10,000,
	// range 1..1,000,000.
	MaxEntries int `yaml:"max_entries"`
}

// Cache stores and scopes.
const (
	CacheAuto   = "auto"
	CacheMemory = "memory"
	CacheSQLite = "sqlite"
	CacheRedis  = "redis"

	// DefaultSemanticMaxEntries is cache.semantic.max_entries when omitted.
	DefaultSemanticMaxEntries = 10_000

	ScopeTenant = "tenant"
	ScopeGlobal = "global"
)

// CacheRule is one model's effective cache settings.
type CacheRule struct {
	TTL           time.Duration
	MaxBytes      int64
	MaxEntryBytes int64
	// Own: the model has its own byte budget (max_bytes in its section).
	Own      bool
	Global   bool
	Sampled  bool
	Semantic *SemanticCache
	Timeout  time.Duration
}

// CacheFor returns m's effective cache settings and whether its cache is
// on: its own section's fields over the global ones.
func (c *Config) CacheFor(m *Model) (CacheRule, bool) {
	g := &c.Cache
	on := g.Enabled != nil && *g.Enabled
	r := CacheRule{TTL: g.TTL.D(), MaxBytes: g.MaxBytes, MaxEntryBytes: g.MaxEntryBytes, Global: g.Scope == ScopeGlobal,
		Sampled: g.Sampled != nil && *g.Sampled, Semantic: g.Semantic, Timeout: g.Timeout.D()}
	mc := m.Cache
	if mc == nil {
		return r, on
	}
	on = mc.Enabled == nil || *mc.Enabled
	if mc.TTL > 0 {
		r.TTL = mc.TTL.D()
	}
	if mc.MaxBytes > 0 {
		r.MaxBytes, r.Own = mc.MaxBytes, true
	}
	if mc.MaxEntryBytes > 0 {
		r.MaxEntryBytes = mc.MaxEntryBytes
	}
	if mc.Scope != "" {
		r.Global = mc.Scope == ScopeGlobal
	}
	if mc.Sampled != nil {
		r.Sampled = *mc.Sampled
	}
	if mc.Semantic != nil {
		r.Semantic = mc.Semantic
	}
	return r, on
}

func (l *loader) cacheDefaults(c *Config) {
	g := &c.Cache
	setDefault(l, "cache.ttl", &g.TTL, Duration(time.Hour))
	setDefault(l, "cache.max_bytes", &g.MaxBytes, 256*mib)
	setDefault(l, "cache.max_entry_bytes", &g.MaxEntryBytes, mib)
	setDefault(l, "cache.scope", &g.Scope, ScopeTenant)
	setDefault(l, "cache.store", &g.Store, CacheAuto)
	setDefault(l, "cache.timeout", &g.Timeout, Duration(100*time.Millisecond))
	semanticDefaults(l, "cache.semantic", g.Semantic)
	if g.Semantic != nil && !l.has("cache.semantic.max_entries") {
		g.Semantic.MaxEntries = DefaultSemanticMaxEntries
	}
	for i, m := range c.Models {
		if m.Cache != nil {
			semanticDefaults(l, modelPath(i)+".cache.semantic", m.Cache.Semantic)
		}
	}
}

func semanticDefaults(l *loader, path string, s *SemanticCache) {
	if s == nil {
		return
	}
	if s.Threshold == nil {
		t := 0.95
		s.Threshold = &t
	}
	setDefault(l, path+".timeout", &s.Timeout, Duration(5*time.Second))
}

func (l *loader) validateCache(c *Config) {
	g := &c.Cache
	l.validateCacheRule(c, "cache", g, nil)
	l.oneOf("cache.store", g.Store, []string{CacheAuto, CacheMemory, CacheSQLite, CacheRedis})
	if g.Store == CacheRedis && !c.Redis.Enabled() {
		l.errAt("cache.store", "redis needs redis.url (or %s)", EnvRedisURL)
	}
	if g.Path != "" && (g.Store == CacheMemory || g.Store == CacheRedis) {
		l.errAt("cache.path", "only used with store: sqlite or auto (store is %s)", g.Store)
	}
	l.durRange("cache.timeout", g.Timeout, time.Millisecond, 10*time.Second)
	if g.Semantic != nil {
		l.intRange("cache.semantic.max_entries", int64(g.Semantic.MaxEntries), 1, 1_000_000)
	}
	for i, m := range c.Models {
		if m.Cache != nil {
			l.validateCacheRule(c, modelPath(i)+".cache", m.Cache, m)
		}
	}
}

// validateCacheRule checks one cache section at path (m is its model, nil
// for the global one; a model's omitted fields are inherited, not
// checked).
func (l *loader) validateCacheRule(c *Config, path string, s *Cache, m *Model) {
	const gib = 1024 * mib
	if m == nil || l.has(path+".ttl") {
		l.durRange(path+".ttl", s.TTL, time.Second, 30*day)
	}
	if m == nil || l.has(path+".max_bytes") {
		l.intRange(path+".max_bytes", s.MaxBytes, mib, 64*gib)
	}
	if m == nil || l.has(path+".max_entry_bytes") {
		l.intRange(path+".max_entry_bytes", s.MaxEntryBytes, 1024, 64*mib)
	}
	if m == nil || s.Scope != "" {
		l.oneOf(path+".scope", s.Scope, []string{ScopeTenant, ScopeGlobal})
	}
	if m != nil {
		for _, f := range []string{"store", "path", "timeout"} {
			if l.has(path + "." + f) {
				l.errAt(path+"."+f, "only in the global cache: section (one store serves every model)")
			}
		}
		if l.has(path + ".semantic.max_entries") {
			l.errAt(path+".semantic.max_entries", "only in the global cache: section (one index serves every model)")
		}
		if r, _ := c.CacheFor(m); r.MaxEntryBytes > r.MaxBytes {
			l.errAt(path+".max_entry_bytes", "must not exceed the model's max_bytes (%d)", r.MaxBytes)
		}
	} else if s.MaxEntryBytes > s.MaxBytes {
		l.errAt(path+".max_entry_bytes", "must not exceed cache.max_bytes (%d)", s.MaxBytes)
	}
	if sem := s.Semantic; sem != nil {
		sp := path + ".semantic"
		switch em := sem.EmbeddingModel; {
		case em == "":
			l.errAt(sp+".embedding_model", "required: a model of this config that serves /v1/embeddings")
		case c.modelNamed(em) == nil:
			l.errAt(sp+".embedding_model", "unknown model %q", em)
		case m != nil && em == m.Name:
			l.errAt(sp+".embedding_model", "must be another model than this one")
		}
		l.floatRange(sp+".threshold", *sem.Threshold, 0.5, 1)
		l.durRange(sp+".timeout", sem.Timeout, 100*time.Millisecond, time.Minute)
	}
}

// modelNamed finds a model by name before Parse has indexed them.
func (c *Config) modelNamed(name string) *Model {
	for _, m := range c.Models {
		if m.Name == name {
			return m
		}
	}
	return nil
}
