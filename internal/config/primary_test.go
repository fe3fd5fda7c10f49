package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWritePrimary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	in := `# my gateway
providers:
  a: {type: mock}
  b:
    type: mock # the spare
models:
  - name: m
    providers:
      - provider: a
        primary: true
      - provider: b
`
	os.WriteFile(path, []byte(in), 0o600)
	if err := WritePrimary(path, map[string]string{"m": "b"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Models[0].Primary(); p != 1 || c.Models[0].Providers[0].Primary {
		t.Fatalf("primary index = %d", p)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), "# my gateway") || !strings.Contains(string(b), "# the spare") {
		t.Fatalf("comments lost:\n%s", b)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode changed to %v", st.Mode().Perm())
	}
}
