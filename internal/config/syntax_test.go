package config

import (
	"strings"
	"testing"
)

// TestSyntaxErrorLine: a YAML syntax error names the line that is wrong,
// not the line where the enclosing block began.
func TestSyntaxErrorLine(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"mis-indented key", "providers:\n  a:\n    type: mock\n   base_url: x\nmodels: []\n", "c.yaml:4: did not find expected key"},
		{"mis-indented deep", "providers:\n  a:\n    type: mock\nmodels:\n  - name: m\n    providers:\n      - provider: a\n     model: x\n", "c.yaml:8: "},
		{"tab indentation", "providers:\n\ta: {type: mock}\n", "c.yaml:2: "},
		{"unclosed flow", "providers:\n  a: {type: mock\nmodels: []\n", "c.yaml:"},
		{"multi-line flow is fine, error later", "providers:\n  a: {type: mock,\n      mock: {tokens: 3}}\n  b:\n    type: mock\n   x: 1\n", "c.yaml:6: did not find expected key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), "c.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}
