// Package visible renders strings that came from outside (a client, a
// config file, a provider) for terminals, logs and files: every byte that
// is not UTF-8 and every character that acts instead of showing
// (controls such as ESC, CR, NUL), shows nothing (format characters:
// bidirectional overrides, zero-width characters, tags, the soft hyphen)
// or breaks lines for some readers (U+2028, U+2029) is written as an
// escape (\x1b, \u202e, \U000e0001). What remains cannot move a cursor,
// clear a screen, split a line or pass for another name.
package visible

import (
	"fmt"
	"iter"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape is s with every hidden character written as an escape.
func Escape(s string) string {
	if Plain(s) {
		return s
	}
	var b strings.Builder
	for p := range Pieces(s) {
		b.WriteString(p)
	}
	return b.String()
}

// Plain reports whether s needs no escape.
func Plain(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || Hidden(r) {
			return false
		}
	}
	return true
}

// Pieces yields s one character at a time, each hidden one as its escape
// (a caller that bounds its output stops between pieces, never inside an
// escape or a character).
func Pieces(s string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := 0; i < len(s); {
			r, n := utf8.DecodeRuneInString(s[i:])
			var piece string
			switch {
			case r == utf8.RuneError && n == 1:
				piece = fmt.Sprintf(`\x%02x`, s[i])
			case r < utf8.RuneSelf && unicode.IsControl(r):
				piece = fmt.Sprintf(`\x%02x`, r)
			case Hidden(r) && r > 0xffff:
				piece = fmt.Sprintf(`\U%08x`, r)
			case Hidden(r):
				piece = fmt.Sprintf(`\u%04x`, r)
			default:
				piece = s[i : i+n]
			}
			if !yield(piece) {
				return
			}
			i += n
		}
	}
}

// Hidden reports whether r acts instead of showing (controls), shows
// nothing (format characters) or breaks lines (U+2028, U+2029).
func Hidden(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r)
}
