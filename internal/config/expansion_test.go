package config

import (
	"fmt"
	"strings"
	"testing"
)

// A few KB of nested aliases that would expand to 27 million values is
// refused with one clear error, not decoded for minutes (check and hot
// reload would hang on it).
func TestAliasExpansionBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("x-hdr: &h {")
	for i := range 300 {
		fmt.Fprintf(&b, "H%d: v,", i)
	}
	b.WriteString("}\nx-mp: &p {provider: a, headers: *h}\n")
	b.WriteString("x-m: &m {name: m, providers: [" + strings.Repeat("*p,", 299) + "*p]}\n")
	b.WriteString("providers:\n  a: {type: mock}\nmodels: [" + strings.Repeat("*m,", 299) + "*m]\n")
	_, err := Parse([]byte(b.String()), "bomb.yaml")
	if err == nil || !strings.Contains(err.Error(), "expands to more than 100000 values") {
		t.Fatalf("err = %.300v", err)
	}
}
