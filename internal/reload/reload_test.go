package reload

import (
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWatchSeesRenameSaveAndIgnoresTouch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	os.WriteFile(path, []byte("a: 1\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes := make(chan struct{}, 10)
	go Watch(ctx, path, 0, slog.New(slog.NewTextHandler(io.Discard, nil)), func() { changes <- struct{}{} })
	time.Sleep(50 * time.Millisecond) // let the watcher start

	// An editor's save: write a temp file, rename it over the config.
	tmp := filepath.Join(dir, ".config.yaml.swp")
	os.WriteFile(tmp, []byte("a: 2\n"), 0o644)
	os.Rename(tmp, path)
	select {
	case <-changes:
	case <-time.After(3 * time.Second):
		t.Fatal("rename-save not noticed")
	}
	// Same content again: no reload.
	os.WriteFile(path, []byte("a: 2\n"), 0o644)
	select {
	case <-changes:
		t.Fatal("unchanged content triggered a reload")
	case <-time.After(300 * time.Millisecond):
	}
}

func TestWatchPolls(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	os.WriteFile(path, []byte("a: 1\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes := make(chan struct{}, 10)
	// With polling on, a plain in-place write is noticed too (bind mounts
	// deliver no events).
	go Watch(ctx, path, 20*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)), func() { changes <- struct{}{} })
	time.Sleep(30 * time.Millisecond)
	os.WriteFile(path, []byte("a: 3\n"), 0o644)
	select {
	case <-changes:
	case <-time.After(3 * time.Second):
		t.Fatal("change not noticed")
	}
}

// TestFilesFollowsTheReloadedInterval: a reload that sets
// config_poll_interval to 0 stops watching, one that sets it back starts
// again, and a reload that changes nothing keeps the running watches.
func TestFilesFollowsTheReloadedInterval(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	os.WriteFile(path, []byte("a: 1\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes := make(chan string, 10)
	f := NewFiles(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), func(trigger string) { changes <- trigger })
	files := map[string]string{path: "file change"}

	f.Set(0, files, nil)
	os.WriteFile(path, []byte("a: 2\n"), 0o644)
	select {
	case tr := <-changes:
		t.Fatalf("interval 0 still watched: %s", tr)
	case <-time.After(150 * time.Millisecond):
	}
	f.Set(20*time.Millisecond, files, nil)
	if f.Interval() != 20*time.Millisecond {
		t.Fatalf("interval %v", f.Interval())
	}
	os.WriteFile(path, []byte("a: 3\n"), 0o644)
	select {
	case tr := <-changes:
		if tr != "file change" {
			t.Fatalf("trigger %q", tr)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the change was not noticed after the interval was set")
	}
	f.Set(20*time.Millisecond, map[string]string{path: "file change"}, nil) // same: no restart, no spurious call
	select {
	case tr := <-changes:
		t.Fatalf("unchanged settings caused a reload: %s", tr)
	case <-time.After(100 * time.Millisecond):
	}
}

// A write made right after Set returns is a change, even before the
// watching goroutine has run (the gateway logs "listening" after Set, and a
// baseline read later would swallow such a write for good).
func TestSetBaselineIsTakenBeforeItReturns(t *testing.T) {
	for i := range 20 {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.yaml")
		os.WriteFile(path, []byte("a: 1\n"), 0o644)
		ctx, cancel := context.WithCancel(context.Background())
		changes := make(chan string, 10)
		f := NewFiles(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), func(tr string) { changes <- tr })
		f.Set(20*time.Millisecond, map[string]string{path: "config"}, nil)
		os.WriteFile(path, []byte("a: 2\n"), 0o644)
		select {
		case <-changes:
		case <-time.After(5 * time.Second):
			t.Fatalf("run %d: a write right after Set was never noticed", i)
		}
		cancel()
	}
}

// A write that lands between the read a config was built from and Set
// (a reload applying a keys file at a new path while its editor saves
// again) is a change: the baseline is the content in force, not the
// content Set finds.
func TestSetBaselineIsTheContentInForce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.json")
	os.WriteFile(path, []byte(`{"a": 1}`), 0o644)
	inForce := sha256.Sum256([]byte(`{"a": 1}`))
	os.WriteFile(path, []byte(`{"b": 2}`), 0o644) // after the read, before Set
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes := make(chan string, 10)
	f := NewFiles(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), func(tr string) { changes <- tr })
	f.Set(20*time.Millisecond, map[string]string{path: "keys file change"}, map[string][]byte{path: inForce[:]})
	select {
	case tr := <-changes:
		if tr != "keys file change" {
			t.Fatalf("trigger %q", tr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a write between the config's read and Set was never noticed")
	}
}
