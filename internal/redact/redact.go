// Package redact removes configured secrets (provider API keys) from bytes
// and headers that leave the gateway: an upstream error body that echoes
// the request's Authorization header must not hand the provider key to the
// client.
package redact

import (
	"bytes"
	"net/http"
	"strings"
)

// Mask replaces a secret.
const Mask = "[REDACTED]"

// MinLen is the shortest secret redacted: shorter strings would match
// ordinary text and corrupt answers (no real provider key is that short).
const MinLen = 8

// Secrets is an immutable set of secrets. The nil *Secrets redacts nothing.
type Secrets struct {
	list [][]byte
	strs []string
}

// New returns the set of the given secrets of at least MinLen bytes (nil
// when none qualifies).
func New(secrets []string) *Secrets {
	s := &Secrets{}
	seen := map[string]bool{}
	for _, v := range secrets {
		if len(v) < MinLen || seen[v] {
			continue
		}
		seen[v] = true
		s.list = append(s.list, []byte(v))
		s.strs = append(s.strs, v)
	}
	if len(s.list) == 0 {
		return nil
	}
	return s
}

// Bytes returns b with every secret masked; b itself, unchanged and not
// copied, when it holds none (the common case).
func (s *Secrets) Bytes(b []byte) []byte {
	if s == nil {
		return b
	}
	for _, k := range s.list {
		if bytes.Contains(b, k) {
			b = bytes.ReplaceAll(b, k, mask) // a copy: the caller's b is not modified
		}
	}
	return b
}

var mask = []byte(Mask)

// String is Bytes for a string.
func (s *Secrets) String(v string) string {
	if s == nil {
		return v
	}
	for _, k := range s.strs {
		if strings.Contains(v, k) {
			v = strings.ReplaceAll(v, k, Mask)
		}
	}
	return v
}

// Header masks secrets in h's values, in place.
func (s *Secrets) Header(h http.Header) {
	if s == nil {
		return
	}
	for k, vs := range h {
		copied := false
		for i, v := range vs {
			if r := s.String(v); r != v {
				if !copied { // the slice may be shared with the upstream's
					vs, copied = append([]string(nil), vs...), true
					h[k] = vs
				}
				vs[i] = r
			}
		}
	}
}
