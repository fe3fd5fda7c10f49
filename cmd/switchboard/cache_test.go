package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"switchboard/internal/config"
	"switchboard/internal/server"
)

func TestCacheStoreKind(t *testing.T) {
	base := "providers: {p: {type: mock}}\nmodels: [{name: m, providers: [{provider: p}]}]\n"
	for _, tc := range []struct{ extra, want string }{
		{"cache: {enabled: true}\n", config.CacheSQLite},
		{"cache: {enabled: true}\nstore: {backend: memory}\n", config.CacheMemory},
		{"cache: {enabled: true}\nredis: {url: \"redis://127.0.0.1:1/0\"}\n", config.CacheRedis},
		{"cache: {enabled: true, store: memory}\nredis: {url: \"redis://127.0.0.1:1/0\"}\n", config.CacheMemory},
	} {
		cfg, err := config.Parse([]byte(base+tc.extra), "t.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if got := cacheStoreKind(cfg); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.extra, got, tc.want)
		}
	}
}

// The SQLite cache lives in STATE_DIR/cache.db, opened only when a model
// caches.
func TestOpenCacheSQLite(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, on := range []bool{false, true} {
		dir := t.TempDir()
		yaml := "providers: {p: {type: mock}}\nmodels: [{name: m, providers: [{provider: p}]}]\n"
		if on {
			yaml += "cache: {enabled: true}\n"
		}
		cfg, err := config.Parse([]byte(yaml), "t.yaml")
		if err != nil {
			t.Fatal(err)
		}
		srv := server.New(log, nil, nil)
		closeFn, err := openCache(cfg, dir, srv, log)
		if err != nil {
			t.Fatal(err)
		}
		_, statErr := os.Stat(filepath.Join(dir, "cache.db"))
		if (statErr == nil) != on || (srv.Cache() != nil) != on {
			t.Fatalf("caching %v: file %v, cache %v", on, statErr, srv.Cache())
		}
		closeFn()
	}
}
