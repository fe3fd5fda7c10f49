package config

import (
	"strings"
	"testing"
	"time"
)

const cacheModels = `providers:
  p: {base_url: "https://p.example/v1", api_key: k}
models:
  - name: m
    providers: [{provider: p}]
  - name: emb
    providers: [{provider: p}]
`

func TestCacheSettings(t *testing.T) {
	withModelCache := func(section string) string {
		return strings.Replace(cacheModels, "  - name: m\n", "  - name: m\n    cache: "+section+"\n", 1)
	}
	tests := []struct {
		name string
		yaml string
		on   bool
		want CacheRule
	}{
		{"off by default", cacheModels, false,
			CacheRule{TTL: time.Hour, MaxBytes: 256 * mib, MaxEntryBytes: mib, Timeout: 100 * time.Millisecond}},
		{"global on", cacheModels + "cache: {enabled: true, ttl: 10m, scope: global, sampled: true}\n", true,
			CacheRule{TTL: 10 * time.Minute, MaxBytes: 256 * mib, MaxEntryBytes: mib, Global: true, Sampled: true, Timeout: 100 * time.Millisecond}},
		{"a model's section turns it on with its own budget", withModelCache("{ttl: 30s, max_bytes: 2097152}"), true,
			CacheRule{TTL: 30 * time.Second, MaxBytes: 2 * mib, MaxEntryBytes: mib, Own: true, Timeout: 100 * time.Millisecond}},
		{"a model opts out of a global cache", withModelCache("{enabled: false}") + "cache: {enabled: true}\n", false,
			CacheRule{TTL: time.Hour, MaxBytes: 256 * mib, MaxEntryBytes: mib, Timeout: 100 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parse([]byte(tt.yaml), "t.yaml", noEnv)
			if err != nil {
				t.Fatal(err)
			}
			r, on := c.CacheFor(c.Model("m"))
			if on != tt.on || r != tt.want {
				t.Fatalf("CacheFor = %+v, %v; want %+v, %v", r, on, tt.want, tt.on)
			}
			if c.Cache.Store != CacheAuto {
				t.Fatalf("store %q", c.Cache.Store)
			}
		})
	}
	c, err := parse([]byte(cacheModels+"cache:\n  enabled: true\n  semantic: {embedding_model: emb}\n"), "t.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := c.CacheFor(c.Model("m"))
	if s := r.Semantic; s == nil || s.EmbeddingModel != "emb" || *s.Threshold != 0.95 || s.Timeout.D() != 5*time.Second || s.MaxEntries != DefaultSemanticMaxEntries {
		t.Fatalf("semantic defaults: %+v", r.Semantic)
	}
}

func TestCacheErrors(t *testing.T) {
	model := func(section string) string {
		return strings.Replace(cacheModels, "  - name: m\n", "  - name: m\n    cache: "+section+"\n", 1)
	}
	tests := []struct {
		name, yaml, want string
	}{
		{"ttl", cacheModels + "cache: {ttl: 0}\n", `t.yaml:8: cache.ttl: must be between 1s and 2592000s, got 0s`},
		{"max_bytes", cacheModels + "cache:\n  max_bytes: 10\n", `t.yaml:9: cache.max_bytes: must be between 1048576 and 68719476736, got 10`},
		{"entry over budget", model("{max_bytes: 1048576, max_entry_bytes: 2097152}"), `t.yaml:5: models[0].cache.max_entry_bytes: must not exceed the model's max_bytes (1048576)`},
		{"scope", cacheModels + "cache: {scope: everyone}\n", `t.yaml:8: cache.scope: must be one of tenant, global, got "everyone"`},
		{"store", cacheModels + "cache: {store: disk}\n", `cache.store: must be one of auto, memory, sqlite, redis, got "disk"`},
		{"redis without url", cacheModels + "cache: {store: redis}\n", `t.yaml:8: cache.store: redis needs redis.url`},
		{"path with memory", cacheModels + "cache: {store: memory, path: /tmp/c.db}\n", `cache.path: only used with store: sqlite or auto`},
		{"timeout", cacheModels + "cache: {timeout: 30}\n", `cache.timeout: must be between 1ms and 10s, got 30s`},
		{"store per model", model("{store: memory}"), `t.yaml:5: models[0].cache.store: only in the global cache: section`},
		{"embedding model required", cacheModels + "cache: {semantic: {threshold: 0.9}}\n", `cache.semantic.embedding_model: required`},
		{"unknown embedding model", cacheModels + "cache: {semantic: {embedding_model: nope}}\n", `cache.semantic.embedding_model: unknown model "nope"`},
		{"itself", model("{semantic: {embedding_model: m}}"), `models[0].cache.semantic.embedding_model: must be another model than this one`},
		{"threshold", cacheModels + "cache: {semantic: {embedding_model: emb, threshold: 1.5}}\n", `cache.semantic.threshold: must be between 0.5 and 1, got 1.5`},
		{"max_entries per model", model("{semantic: {embedding_model: emb, max_entries: 5}}"), `models[0].cache.semantic.max_entries: only in the global cache: section`},
		{"unknown field", cacheModels + "cache: {size: 1}\n", `t.yaml:8: cache.size: unknown field (known: enabled, ttl, max_bytes, max_entry_bytes, scope, sampled, semantic, store, path, timeout)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse([]byte(tt.yaml), "t.yaml", noEnv)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCacheRestartFields(t *testing.T) {
	a, err := parse([]byte(cacheModels), "t.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	b, err := parse([]byte(cacheModels+"cache: {enabled: true, ttl: 5m, store: memory}\n"), "t.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(RestartNeeded(a, b), ","); got != "cache.store" {
		t.Fatalf("restart fields: %s", got)
	}
}
