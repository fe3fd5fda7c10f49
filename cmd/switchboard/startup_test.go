package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"switchboard/internal/store"
)

const oneMockYAML = "providers:\n  a: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: a}]\n"

// TestStartupLogVersionIsTheVersionCommand: the version and revision the
// gateway logs at startup are the ones `switchboard version` prints (the
// same binary, one source).
func TestStartupLogVersionIsTheVersionCommand(t *testing.T) {
	p := startProc(t, "version", oneMockYAML, "")
	m := regexp.MustCompile(`switchboard listening.* version="?([^"\s]+)"? revision="?([^"\s]+)"?`).FindStringSubmatch(p.logs())
	if m == nil {
		t.Fatalf("no version in the startup line:\n%s", p.logs())
	}
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, &out, &errb); code != 0 {
		t.Fatalf("version: exit %d: %s", code, errb.String())
	}
	if want := "switchboard " + m[1] + " revision " + m[2]; !strings.HasPrefix(out.String(), want) {
		t.Fatalf("startup log says %q; switchboard version says %q", want, out.String())
	}
}

// TestSecondProcessOnStateDirSaysItWaits: a gateway started on a STATE_DIR
// whose SQLite store another process holds says at once that it waits for
// that lock (it used to wait 5 s in silence), and starts as soon as the
// holder lets go.
func TestSecondProcessOnStateDirSaysItWaits(t *testing.T) {
	dir := t.TempDir()
	holder, err := store.OpenSQLite(filepath.Join(dir, store.DefaultFile))
	if err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			holder.Close()
		}
	}()
	p := launchProc(t, "second", oneMockYAML, dir)
	waitLog(t, p, "waiting for the store lock held by another process")
	if strings.Contains(p.logs(), "switchboard listening") {
		t.Fatalf("started while another process held the store:\n%s", p.logs())
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	released = true
	p.waitListening(t)
}
