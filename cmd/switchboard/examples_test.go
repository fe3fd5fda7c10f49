package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryExamplePassesCheck: each examples/*.yaml passes `switchboard
// check` without warnings once the variables it needs (the ${VAR}s
// without a default) are set, as its header comment says.
func TestEveryExamplePassesCheck(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) < 8 {
		t.Fatalf("examples: %v %v", files, err)
	}
	required := regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range required.FindAllStringSubmatch(string(b), -1) {
				t.Setenv(m[1], "test-value-"+strings.ToLower(m[1]))
			}
			t.Setenv("SWITCHBOARD_REDIS_URL", "")
			var out, errb bytes.Buffer
			if code := run([]string{"check", f}, &out, &errb); code != 0 {
				t.Fatalf("exit %d:\n%s", code, errb.String())
			}
			if strings.Contains(out.String(), "warning:") {
				t.Fatalf("warnings:\n%s", out.String())
			}
		})
	}
}
