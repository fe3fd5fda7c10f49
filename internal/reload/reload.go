// Package reload notices config file changes: fsnotify on the file's
// directory (editors save by rename, so watching the file itself loses
// track), plus polling for bind mounts where events do not arrive.
package reload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch calls onChange whenever the content of path changes, until ctx is
// done. poll is the polling interval (0 = no polling). Bursts of events are
// coalesced, and a change that leaves the content identical is ignored.
func Watch(ctx context.Context, path string, poll time.Duration, log *slog.Logger, onChange func()) {
	watch(ctx, path, digest(path), poll, log, onChange)
}

// watch is Watch from a baseline digest taken by the caller, so a change
// made before the goroutine first runs is still a change.
func watch(ctx context.Context, path string, last []byte, poll time.Duration, log *slog.Logger, onChange func()) {
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
			// A poll can land between a writer's truncate and its write;
			// a change seen by polling waits for quiet like an event does,
			// so one save is one reload, not an empty read and then another.
			if settle == nil {
				if d := digest(path); d != nil && !bytes.Equal(d, last) {
					settle = time.After(100 * time.Millisecond)
				}
			}
		}
	}
}

// digest is the file's content hash, nil when it cannot be read (mid-save).
// At most maxDigest bytes are hashed, streamed: a path that names something
// endless (a symlink to /dev/zero) costs a bounded read per poll, never
// memory; the config loader refuses such a file with its own error.
func digest(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, maxDigest)); err != nil {
		return nil
	}
	return h.Sum(nil)
}

// maxDigest is the largest file the loader reads (config.MaxKeysFileBytes).
const maxDigest = 64 << 20

// Files keeps one Watch running per file with one poll interval, and
// restarts them when a reload changes the interval or the files, so
// performance.config_poll_interval takes effect without a restart. An
// interval of 0 stops watching (LLM Proxy's "0 disables hot reload");
// signals still reload.
type Files struct {
	ctx      context.Context
	log      *slog.Logger
	onChange func(trigger string)

	mu       sync.Mutex
	cancel   context.CancelFunc
	interval time.Duration
	files    map[string]string // path → trigger name
}

// NewFiles returns an idle set; Set starts it. onChange gets the trigger
// name of the file that changed.
func NewFiles(ctx context.Context, log *slog.Logger, onChange func(trigger string)) *Files {
	return &Files{ctx: ctx, log: log, onChange: onChange, cancel: func() {}}
}

// Set watches files (path → trigger name) every interval; the same
// interval and files keep the running watches. baselines holds the
// SHA-256 of the content in force for a path (what the config was built
// from): a write between that read and this call is still a change. A
// path without one is read now. It may be called from onChange.
func (f *Files) Set(interval time.Duration, files map[string]string, baselines map[string][]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.files != nil && interval == f.interval && maps.Equal(files, f.files) {
		return
	}
	f.cancel()
	f.interval, f.files = interval, maps.Clone(files)
	if f.files == nil {
		f.files = map[string]string{}
	}
	ctx, cancel := context.WithCancel(f.ctx)
	f.cancel = cancel
	if interval <= 0 {
		return
	}
	for path, trigger := range files {
		// The baseline is fixed here, not in the goroutine: once Set has
		// returned (the gateway says it is listening), any write counts.
		base := baselines[path]
		if base == nil {
			base = digest(path)
		}
		go watch(ctx, path, base, interval, f.log, func() { f.onChange(trigger) })
	}
}

// Interval is the poll interval in force (0 = not watching).
func (f *Files) Interval() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.interval
}
