// Package jsoncheck validates JSON that comes from outside (clients,
// providers, Redis) without trusting its shape. gjson's validator recurses
// once per nesting level, so a 2 MB body of '[' grows a goroutine stack to
// hundreds of MB, and a larger one past Go's stack limit: a fatal error that
// no recover catches. Nesting is bounded first, in a pass that allocates
// nothing.
package jsoncheck

import (
	"bytes"

	"github.com/tidwall/gjson"
)

// MaxDepth bounds the nesting of arrays and objects. Real requests (JSON
// schemas in tools included) stay far below it; encoding/json allows 10,000.
const MaxDepth = 512

// Valid reports whether b is valid JSON nested at most MaxDepth deep.
func Valid(b []byte) bool {
	return DepthOK(b, MaxDepth) && gjson.ValidBytes(b)
}

// DepthOK reports whether no array or object in b is nested deeper than max
// (b need not be valid JSON; brackets inside strings do not count).
func DepthOK(b []byte, max int) bool {
	// Fewer openers than the bound cannot nest deeper: one vectorised
	// count each settles every ordinary body without the byte loop.
	if bytes.Count(b, openBrace)+bytes.Count(b, openBracket) <= max {
		return true
	}
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++ // the escaped byte cannot end the string
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > max {
				return false
			}
		case '}', ']':
			depth--
		}
	}
	return true
}

var openBrace, openBracket = []byte{'{'}, []byte{'['}
