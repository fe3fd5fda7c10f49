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
// characters (ESC, CR, NUL…), format characters (bidirectional overrides,
// zero-width characters, tags, the soft hyphen) and the line and paragraph
// separators written as escapes (\x1b, \u202e, \u200b), so that no
// export, terminal or spreadsheet runs, splits or reorders what a client
// sent, and no name passes for another by an invisible character; cut to
// MaxClientText bytes with "…".
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
		case hidden(r) && r > 0xffff:
			piece = fmt.Sprintf(`\U%08x`, r)
		case hidden(r):
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
		if r == utf8.RuneError || hidden(r) {
			return false
		}
	}
	return true
}

// hidden: a character that acts instead of showing (controls), shows
// nothing (format characters: bidi overrides, zero-width ones, tags) or
// breaks lines for some readers (U+2028, U+2029).
func hidden(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r)
}
