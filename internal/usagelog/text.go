package usagelog

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxClientText bounds a client-chosen string kept in a row (a refused
// request's model name): short enough that a model= filter (at most
// maxParam bytes) can still name it.
const MaxClientText = 200

// ClientText is s as a row may keep it: bytes that are not UTF-8, control
// characters (ESC, CR, NUL…) and bidirectional overrides written as
// escapes (\x1b, \u202e), so that no export, terminal or spreadsheet runs
// or reorders what a client sent; cut to MaxClientText bytes with "…".
func ClientText(s string) string {
	if len(s) <= MaxClientText && printable(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && n == 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case r < utf8.RuneSelf && unicode.IsControl(r):
			piece = fmt.Sprintf(`\x%02x`, r)
		case unicode.IsControl(r) || bidi(r):
			piece = fmt.Sprintf(`\u%04x`, r)
		default:
			piece = s[i : i+n]
		}
		if b.Len()+len(piece) > MaxClientText-len("…") {
			b.WriteString("…")
			break
		}
		b.WriteString(piece)
		i += n
	}
	return b.String()
}

func printable(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || bidi(r) {
			return false
		}
	}
	return true
}

// bidi: the characters that reorder the text around them.
func bidi(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}
