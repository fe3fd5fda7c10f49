// Package reload notices config file changes: fsnotify on the file's
// directory (editors save by rename, so watching the file itself loses
// track), plus polling for bind mounts where events do not arrive.
package reload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch calls onChange whenever the content of path changes, until ctx is
// done. poll is the polling interval (0 = no polling). Bursts of events are
// coalesced, and a change that leaves the content identical is ignored.
func Watch(ctx context.Context, path string, poll time.Duration, log *slog.Logger, onChange func()) {
	last := digest(path)
	check := func() {
		if d := digest(path); d != nil && !bytes.Equal(d, last) {
			last = d
			onChange()
		}
	}
	var events <-chan fsnotify.Event
	if w, err := fsnotify.NewWatcher(); err != nil {
		log.Warn("config file watching unavailable; polling only", "error", err.Error())
	} else {
		defer w.Close()
		if err := w.Add(filepath.Dir(path)); err != nil {
			log.Warn("cannot watch the config directory; polling only", "dir", filepath.Dir(path), "error", err.Error())
		} else {
			events = w.Events
		}
	}
	var tick <-chan time.Time
	if poll > 0 {
		t := time.NewTicker(poll)
		defer t.Stop()
		tick = t.C
	}
	// Editors write in several steps; wait for quiet before reading.
	var settle <-chan time.Time
	base := filepath.Base(path)
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if filepath.Base(ev.Name) == base {
				settle = time.After(100 * time.Millisecond)
			}
		case <-settle:
			settle = nil
			check()
		case <-tick:
			check()
		}
	}
}

// digest is the file's content hash, nil when it cannot be read (mid-save).
func digest(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	h := sha256.Sum256(b)
	return h[:]
}
