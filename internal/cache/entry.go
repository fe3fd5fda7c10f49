package cache

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// Entry is one stored answer, as its client received it: status, the
// headers worth keeping, and the body, or a stream's bytes cut where the
// gateway flushed them (Chunks), so that a replay keeps the original
// chunking. It also carries what the original cost, for the hit's
// saved_usd, and who served it.
type Entry struct {
	Stored time.Time
	Status int
	Header http.Header
	Stream bool
	// Chunks is the body: one chunk for a unary answer, one per flush for
	// a stream.
	Chunks [][]byte
	// CostNano is what the original answer cost (nano-USD); Priced is
	// false when its price was unknown (CostNano is then 0).
	CostNano int64
	Priced   bool
	// Provider, ProviderModel and ServedModel served the original.
	Provider, ProviderModel, ServedModel string
}

// Size is the entry's encoded size in bytes.
func (e *Entry) Size() int64 {
	n := int64(256) // the meta line, roughly
	for k, vs := range e.Header {
		n += int64(len(k))
		for _, v := range vs {
			n += int64(len(v)) + 4
		}
	}
	for _, c := range e.Chunks {
		n += int64(len(c)) + 8
	}
	return n
}

// Body is the whole body (all chunks together).
func (e *Entry) Body() []byte {
	if len(e.Chunks) == 1 {
		return e.Chunks[0]
	}
	return bytes.Join(e.Chunks, nil)
}

// keptHeaders are the answer headers a replay repeats: what the answer is
// and who made it. Everything else (request ids, the provider's rate-limit
// state, lengths, dates) described the original response only.
var keptHeaders = []string{"Content-Type", "X-Switchboard-Model", "X-Switchboard-Provider", "X-Switchboard-Fallback-Model"}

// KeepHeaders copies the headers of h that an entry keeps.
func KeepHeaders(h http.Header) http.Header {
	out := make(http.Header, len(keptHeaders))
	for _, k := range keptHeaders {
		if v := h.Values(k); len(v) > 0 {
			out[k] = append([]string(nil), v...)
		}
	}
	return out
}

type meta struct {
	V        int         `json:"v"`
	Stored   int64       `json:"t"`
	Status   int         `json:"s"`
	Header   http.Header `json:"h,omitempty"`
	Stream   bool        `json:"st,omitempty"`
	Chunks   []int       `json:"c"`
	CostNano int64       `json:"cost,omitempty"`
	Priced   bool        `json:"priced,omitempty"`
	Provider string      `json:"p,omitempty"`
	PModel   string      `json:"pm,omitempty"`
	Served   string      `json:"sm,omitempty"`
}

// maxChunks bounds a decoded entry's chunk count (a stream of a few MB
// has thousands of flushes, not millions).
const maxChunks = 1 << 20

var errMalformed = errors.New("cache: malformed entry")

// Encode renders e as one JSON line of metadata, then the chunks' bytes.
func (e *Entry) Encode() []byte {
	m := meta{V: 1, Stored: e.Stored.UnixMilli(), Status: e.Status, Header: e.Header, Stream: e.Stream,
		Chunks: make([]int, len(e.Chunks)), CostNano: e.CostNano, Priced: e.Priced, Provider: e.Provider,
		PModel: e.ProviderModel, Served: e.ServedModel}
	n := 0
	for i, c := range e.Chunks {
		m.Chunks[i] = len(c)
		n += len(c)
	}
	b, _ := json.Marshal(m)
	out := make([]byte, 0, len(b)+1+n)
	out = append(append(out, b...), '\n')
	for _, c := range e.Chunks {
		out = append(out, c...)
	}
	return out
}

// Decode reads an encoded entry; the chunks alias b.
func Decode(b []byte) (*Entry, error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, errMalformed
	}
	var m meta
	if err := json.Unmarshal(b[:i], &m); err != nil || m.V != 1 || len(m.Chunks) > maxChunks {
		return nil, errMalformed
	}
	rest := b[i+1:]
	e := &Entry{Stored: time.UnixMilli(m.Stored), Status: m.Status, Header: m.Header, Stream: m.Stream,
		Chunks: make([][]byte, len(m.Chunks)), CostNano: m.CostNano, Priced: m.Priced, Provider: m.Provider,
		ProviderModel: m.PModel, ServedModel: m.Served}
	for j, n := range m.Chunks {
		if n < 0 || n > len(rest) {
			return nil, errMalformed
		}
		e.Chunks[j], rest = rest[:n:n], rest[n:]
	}
	if len(rest) != 0 {
		return nil, errMalformed
	}
	return e, nil
}
