package main

import (
	"log/slog"
	"path/filepath"

	"switchboard/internal/cache"
	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/queue"
	"switchboard/internal/server"
)

// cacheStoreKind resolves cache.store: auto is redis with redis.url (one
// cache for the fleet), else sqlite with store.backend sqlite, else
// memory.
func cacheStoreKind(cfg *config.Config) string {
	if k := cfg.Cache.Store; k != config.CacheAuto {
		return k
	}
	switch {
	case cfg.Redis.Enabled():
		return config.CacheRedis
	case cfg.Store.Backend == config.StoreSQLite:
		return config.CacheSQLite
	}
	return config.CacheMemory
}

// cachePath is the SQLite cache's file: cache.path, else STATE_DIR/cache.db.
func cachePath(cfg *config.Config, stateDir string) string {
	if cfg.Cache.Path != "" {
		return cfg.Cache.Path
	}
	return filepath.Join(stateDir, cache.DefaultFile)
}

// openCache opens the response cache's store when the config caches any
// model (none is opened otherwise: a reload that turns caching on gets an
// in-memory cache until the next restart) and gives it to srv. The
// semantic index lives in Redis with the Redis store, else in memory.
func openCache(cfg *config.Config, stateDir string, srv *server.Server, log *slog.Logger) (func(), error) {
	if len(cache.Compile(cfg)) == 0 {
		return func() {}, nil
	}
	max := config.DefaultSemanticMaxEntries
	if s := cfg.Cache.Semantic; s != nil {
		max = s.MaxEntries
	}
	var st cache.Store
	var idx cache.Index
	closeFn := func() {}
	switch kind := cacheStoreKind(cfg); kind {
	case config.CacheRedis:
		c, err := queue.Dial(cfg.Redis.URL, cfg.Redis.CommandTimeout.D(), cfg.Redis.ConnectTimeout.D(), 32)
		if err != nil {
			return nil, err
		}
		st, idx, closeFn = cache.NewRedis(c), cache.NewRedisIndex(c, max), func() { c.Close() }
	case config.CacheSQLite:
		s, err := cache.OpenSQLite(cachePath(cfg, stateDir), nil)
		if err != nil {
			return nil, err
		}
		st, idx, closeFn = s, cache.NewMemoryIndex(max, nil), func() { s.Close() }
	default:
		st, idx = cache.NewMemory(nil), cache.NewMemoryIndex(max, nil)
	}
	srv.SetCache(cache.New(cache.Options{Store: st, Index: idx, Timeout: cfg.Cache.Timeout.D(), Clock: clock.Real{}, Log: log,
		Registerer: srv.Metrics.Registry}))
	log.Info("response cache on", "store", cacheStoreKind(cfg))
	return closeFn, nil
}
