// Package state persists what the gateway learned about providers (active
// choice, samples, circuits, quota pauses, request counts) across restarts,
// in STATE_DIR/provider_state.json.
package state

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/route"
)

// maxFile bounds the state file: 100 samples per provider of each model
// are a few KB; a file past this is not one the gateway wrote.
const maxFile = 64 << 20

// Version is the file format version; another version is ignored.
const Version = 1

// FileName is the state file's name inside STATE_DIR.
const FileName = "provider_state.json"

// File is the persisted state.
type File struct {
	Version int              `json:"version"`
	SavedAt time.Time        `json:"saved_at"`
	Models  map[string]Model `json:"models"`
}

// Model is one model's state.
type Model struct {
	ActiveProvider string                    `json:"active_provider"`
	Samples        map[string][]route.Sample `json:"samples"`
	Circuits       map[string]Circuit        `json:"circuits"`
	QuotaPauses    map[string]Pause          `json:"quota_pauses"`
	RequestCount   int64                     `json:"request_count"`
}

// Circuit is a provider's breaker state.
type Circuit struct {
	Open     bool      `json:"open"`
	OpenedAt time.Time `json:"opened_at,omitzero"`
}

// Pause is a provider's quota pause.
type Pause struct {
	Until  time.Time `json:"until"`
	Reason string    `json:"reason"`
}

// Save writes f atomically: a temp file in the same directory, synced,
// then renamed over the old one, so a crash never leaves half a file.
func Save(dir string, f *File) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".provider_state-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, FileName))
}

// Load reads the state file. A missing file is (nil, nil); a corrupt or
// foreign-version file is an error the caller logs and ignores.
func Load(dir string) (*File, error) {
	b, err := config.ReadFile(filepath.Join(dir, FileName), maxFile)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("corrupt state file: %w", err)
	}
	if f.Version != Version {
		return nil, fmt.Errorf("state file version %d, this build reads version %d", f.Version, Version)
	}
	return &f, nil
}
