package store

import (
	"path/filepath"

	"switchboard/internal/config"
)

// DefaultFile is the SQLite file name under STATE_DIR.
const DefaultFile = "switchboard.db"

// Open opens the store a config asks for: memory, or SQLite at store.path
// (default stateDir/switchboard.db).
func Open(cfg *config.Config, stateDir string) (Store, error) {
	if cfg.Store.Backend == config.StoreMemory {
		return NewMemory(), nil
	}
	path := cfg.Store.Path
	if path == "" {
		path = filepath.Join(stateDir, DefaultFile)
	}
	return OpenSQLite(path)
}
