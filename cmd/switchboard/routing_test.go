package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckRefusesFallbackCycles: `switchboard check` exits 1 naming the
// cycle (through other models, and a model naming itself) with its line.
func TestCheckRefusesFallbackCycles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cycle.yaml")
	os.WriteFile(path, []byte(`providers:
  p: {type: mock}
models:
  - {name: a, providers: [{provider: p}], fallbacks: [b]}
  - {name: b, providers: [{provider: p}], fallbacks: {models: [a], on: [error]}}
  - {name: c, providers: [{provider: p}], fallbacks: [c]}
`), 0o644)
	var out, errb bytes.Buffer
	if code := run([]string{"check", path}, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1:\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{
		"cycle.yaml:4: models[0].fallbacks: fallback cycle a -> b -> a",
		`cycle.yaml:6: models[2].fallbacks: model "c" falls back to itself`,
	} {
		if !strings.Contains(errb.String()+out.String(), want) {
			t.Errorf("missing %q in:\n%s%s", want, out.String(), errb.String())
		}
	}
}
