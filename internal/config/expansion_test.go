package config

import (
	"errors"
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
	var errs *Errors
	if !errors.As(err, &errs) || len(*errs) != 1 || !strings.Contains(err.Error(), "expands to more than 100000 values") {
		t.Fatalf("err = %.300v", err)
	}
}

// A file over the bound without any alias gets the same one error, not
// one more per model left undecoded (a 15,000-model file printed 1,400).
func TestLargeFileBoundedWithOneError(t *testing.T) {
	var b strings.Builder
	b.WriteString("providers:\n  a: {type: mock}\nmodels:\n")
	for i := range 15000 {
		fmt.Fprintf(&b, "  - {name: m%d, providers: [{provider: a}], fallbacks: [m%d]}\n", i, i+1)
	}
	_, err := Parse([]byte(b.String()), "big.yaml")
	var errs *Errors
	if !errors.As(err, &errs) || len(*errs) != 1 {
		t.Fatalf("want one error, got %.500v", err)
	}
	if got := (*errs)[0].Error(); !strings.Contains(got, "expands to more than 100000 values (its own and those aliases") {
		t.Errorf("got %q", got)
	}
}
