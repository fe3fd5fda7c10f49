package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: any bytes given as a config file are either a config or a
// list of located problems; nothing panics, and a secret value written in
// a secret field never appears in a message about it.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("providers:\n  a: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: a}]\n"))
	f.Add([]byte("providers:\n  a: {base_url: 'https://u:SECRETVALUE@h/v1', api_keys: SECRETVALUE}\n"))
	f.Add([]byte("auth: {token: [SECRETVALUE], keys: {SECRETVALUE: 3}}\n"))
	f.Add([]byte("x: &a [*a]\n"))
	f.Add([]byte("timeouts: {read: 1e309, stream: -1}\nlimits: {max_connections: 0}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		if err == nil {
			if c == nil {
				t.Fatal("no config and no error")
			}
			return
		}
		var es Errors
		if !errors.As(err, &es) {
			return // not a field problem (unreadable YAML): still an error
		}
		for _, e := range es {
			if e.Line < 0 {
				t.Fatalf("negative line: %v", e)
			}
			if secretField(e.Field) && bytes.Contains(data, []byte("SECRETVALUE")) && strings.Contains(e.Msg, "SECRETVALUE") {
				t.Fatalf("a message about a secret field quotes its value: %v", e)
			}
		}
	})
}

// FuzzKeysFile: any bytes in a keys file parse to entries with their lines
// or to one located error; nothing panics.
func FuzzKeysFile(f *testing.F) {
	f.Add([]byte(`{"sk-a": {"tenant": "acme", "rpm": 60, "budget_usd": 1.5}}`))
	f.Add([]byte(`{"sk-a": {"tenant": "a"}, "sk-a": {"tenant": "b"}}`))
	f.Add([]byte(`{"sk-a": 3}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"k": {"tenant": "t", "rpm": 1e99}} trailing`))
	f.Add([]byte("{\n\"k\":\n{\"tier\": -1, \"unknown\": true}\n}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := 1 + bytes.Count(data, []byte("\n"))
		raw, perr := parseKeysJSON(data)
		if perr != nil {
			if perr.line < 1 || perr.line > lines {
				t.Fatalf("error line %d of %d", perr.line, lines)
			}
			return
		}
		for _, r := range raw {
			if r.line < 1 || r.line > lines {
				t.Fatalf("entry line %d of %d", r.line, lines)
			}
			if spec, msg := decodeKeySpec(r.value); spec == nil && msg == "" {
				t.Fatal("an entry neither decoded nor explained")
			}
		}
	})
}
