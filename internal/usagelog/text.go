package usagelog

import (
	"strings"

	"switchboard/internal/visible"
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
	if len(s) <= MaxClientText && visible.Plain(s) {
		return s
	}
	var b strings.Builder
	for piece := range visible.Pieces(s) {
		if b.Len()+len(piece) > MaxClientText-len("…") {
			b.WriteString("…")
			break
		}
		b.WriteString(piece)
	}
	return b.String()
}
