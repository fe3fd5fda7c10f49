package usagelog

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClientText(t *testing.T) {
	// What is escaped is visible.Escape's (its own test); here: kept as
	// is when printable, escaped otherwise, and cut short.
	tests := []struct{ in, want string }{
		{"équipe 日本", "équipe 日本"},
		{"a\x00b\x1b[31mred\r\nX: 1", `a\x00b\x1b[31mred\x0d\x0aX: 1`},
	}
	for _, tt := range tests {
		if got := ClientText(tt.in); got != tt.want {
			t.Errorf("ClientText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	long := ClientText(strings.Repeat("é", 500))
	if len(long) > MaxClientText || !strings.HasSuffix(long, "…") || !utf8.ValidString(long) {
		t.Errorf("a long name: %d bytes %q", len(long), long)
	}
	if long := ClientText(strings.Repeat("\x1b", 500)); len(long) > MaxClientText || !strings.HasSuffix(long, "…") {
		t.Errorf("a long escaped name: %d bytes", len(long))
	}
}

// TestCSVIsUTF8: a row holding bytes that are not UTF-8 (a name stored raw
// by an older gateway) exports as valid UTF-8 CSV; JSON does so by itself.
func TestCSVIsUTF8(t *testing.T) {
	var b strings.Builder
	w := NewRowWriter(&b, FormatCSV)
	if err := w.Write(Row{Model: "x\xff\xfe\xc3", Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if !utf8.ValidString(b.String()) || !strings.Contains(b.String(), "x\uFFFD") {
		t.Errorf("CSV: %q", b.String())
	}
}
