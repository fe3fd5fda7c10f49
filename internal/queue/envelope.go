package queue

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// Terminal is a job's final result as stored: one JSON line of metadata,
// then the raw body bytes (never escaped or re-encoded).
type Terminal struct {
	// Kind: unary, stream, canceled, dead, expired, error.
	Kind   string      `json:"kind"`
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	// Chunks is how many chunk messages a stream sent (its origin checks
	// it saw them all); Error a stream's failure after its start.
	Chunks int    `json:"chunks,omitempty"`
	Error  string `json:"error,omitempty"`
	// Usage is the answer's last reported usage object, as the provider
	// (or translation) wrote it; the worker has already settled it.
	Usage json.RawMessage `json:"usage,omitempty"`
	Body  []byte          `json:"-"`
}

// Encode renders t.
func (t *Terminal) Encode() []byte {
	meta, _ := json.Marshal(t)
	out := make([]byte, 0, len(meta)+1+len(t.Body))
	out = append(append(out, meta...), '\n')
	return append(out, t.Body...)
}

// ParseTerminal reads a stored terminal; a malformed one reads as kind
// "error" (never a panic).
func ParseTerminal(b []byte) Terminal {
	var t Terminal
	i := bytes.IndexByte(b, '\n')
	// A status net/http would refuse to write is as malformed as bad JSON.
	if i < 0 || json.Unmarshal(b[:i], &t) != nil || t.Kind == "" || t.Status < 100 || t.Status > 599 {
		return Terminal{Kind: "error", Status: http.StatusBadGateway, Body: []byte("malformed terminal record")}
	}
	t.Body = b[i+1:]
	return t
}
