package reload

import (
	"context"
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
