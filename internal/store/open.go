package store

import (
	"log/slog"
	"path/filepath"

	"switchboard/internal/config"
)

// DefaultFile is the SQLite file name under STATE_DIR.
const DefaultFile = "switchboard.db"

// Open opens the store a config asks for: Redis when redis.url is set
// (shared by the fleet; store.backend is then unused), else memory, or
// SQLite at store.path (default stateDir/switchboard.db). log receives the
// Redis store's availability transitions and the wait for a SQLite file
// another process holds (nil: slog.Default).
func Open(cfg *config.Config, stateDir string, log *slog.Logger) (Store, error) {
	if cfg.Redis.Enabled() {
		return OpenRedis(RedisOptions{URL: cfg.Redis.URL, Cluster: cfg.Redis.Cluster, Seeds: cfg.Redis.Seeds,
			Sentinel: cfg.Redis.Sentinel, CommandTimeout: cfg.Redis.CommandTimeout.D(),
			ConnectTimeout: cfg.Redis.ConnectTimeout.D(), Log: log})
	}
	if cfg.Store.Backend == config.StoreMemory {
		return NewMemory(), nil
	}
	path := cfg.Store.Path
	if path == "" {
		path = filepath.Join(stateDir, DefaultFile)
	}
	if log == nil {
		log = slog.Default()
	}
	// Another process holding the file is waited for, visibly and for a
	// bounded time (LockWait), not silently.
	return openSQLite(path, LockWait, func() {
		log.Warn("waiting for the store lock held by another process…", "path", path, "up_to", LockWait.String())
	})
}
