package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Protocols a handler names its request by. The key holds the protocol, so
// an answer is only ever replayed to a client of the same protocol (a
// Messages answer never reaches a chat client).
const (
	ProtoChat        = "openai.chat"
	ProtoCompletions = "openai.completions"
	ProtoResponses   = "openai.responses"
	ProtoEmbeddings  = "openai.embeddings"
	ProtoMessages    = "anthropic.messages"
	// ProtoGemini is generateContent and streamGenerateContent (Request.
	// Stream tells them apart: Gemini names streaming in the path).
	ProtoGemini = "gemini.generate"
)

// keyVersion changes when the canonical form changes, so that entries
// written by an older gateway are never read as the same question.
const keyVersion = "sbc1"

// inert are top-level body fields that do not change the answer: model
// and stream come from Request (the path names them for some protocols),
// the others are the caller's own bookkeeping (end-user ids, metadata,
// provider-side storage and prompt-cache routing hints).
var inert = map[string]bool{
	"model": true, "stream": true, "user": true, "metadata": true, "store": true,
	"safety_identifier": true, "prompt_cache_key": true,
}

// KeyHeaders are request headers that change the answer (beta features
// switched on by header); their values are part of the key.
var KeyHeaders = []string{"Anthropic-Beta", "Anthropic-Version", "Openai-Beta"}

// canon writes a JSON value to h in a canonical form: object keys sorted,
// whitespace and string escapes gone, numbers normalised (1.0 and 1 are
// one number; an integer literal is kept exactly, so two 20-digit seeds
// never collide through float rounding). skip, when it returns true for a
// path, writes a placeholder instead of the value there.
type canon struct {
	h    hash.Hash
	skip string // a gjson path whose value is replaced by a marker ("" none)
	// buf gathers small writes for the hash (one Write per few KB).
	buf []byte
}

func (c *canon) tag(t byte, s string) {
	c.buf = append(c.buf, t)
	c.buf = binary.AppendUvarint(c.buf, uint64(len(s)))
	if len(c.buf)+len(s) > cap(c.buf) {
		c.flush()
		if len(s) > cap(c.buf) {
			_, _ = io.WriteString(c.h, s)
			return
		}
	}
	c.buf = append(c.buf, s...)
}

func (c *canon) flush() {
	c.h.Write(c.buf)
	c.buf = c.buf[:0]
}

func (c *canon) value(v gjson.Result, path string) {
	if c.skip != "" && path == c.skip {
		c.tag('?', "")
		return
	}
	switch v.Type {
	case gjson.Null:
		c.tag('n', "")
	case gjson.False:
		c.tag('f', "")
	case gjson.True:
		c.tag('t', "")
	case gjson.String:
		c.tag('s', v.Str)
	case gjson.Number:
		c.tag('d', number(v.Raw))
	default:
		if v.IsArray() {
			i := 0
			c.tag('[', "")
			v.ForEach(func(_, e gjson.Result) bool {
				c.value(e, join(path, strconv.Itoa(i)))
				i++
				return true
			})
			c.tag(']', "")
			return
		}
		c.object(v, path, false)
	}
}

type member struct {
	k string
	v gjson.Result
}

// object writes v's members sorted by key; top drops the inert fields.
func (c *canon) object(v gjson.Result, path string, top bool) {
	var buf [16]member
	ms := buf[:0]
	v.ForEach(func(k, e gjson.Result) bool {
		if !top || !inert[k.Str] {
			ms = append(ms, member{k.Str, e})
		}
		return true
	})
	slices.SortStableFunc(ms, func(a, b member) int { return strings.Compare(a.k, b.k) })
	c.tag('{', "")
	for _, m := range ms {
		c.tag('k', m.k)
		c.value(m.v, join(path, escapeKey(m.k)))
	}
	c.tag('}', "")
}

// number is a number's canonical text: an integer literal as written
// (without a leading plus or zeros, which JSON forbids anyway), any other
// through float64.
func number(raw string) string {
	if !strings.ContainsAny(raw, ".eE") {
		return raw
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		return raw
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// escapeKey escapes a key for a gjson path (only the skip path compares
// against it, so the escaping only has to be consistent).
func escapeKey(k string) string {
	if !strings.ContainsAny(k, ".*?|#@\\!=<>%") {
		return k
	}
	var b strings.Builder
	for _, r := range k {
		if strings.ContainsRune(".*?|#@\\!=<>%", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Request is one client request as a handler hands it to the cache.
type Request struct {
	// Protocol is one of the Proto constants.
	Protocol string
	// Model is the gateway model the client asked for (its route name).
	Model string
	// Tenant scopes the key (ignored under scope: global).
	Tenant string
	// Stream: the client asked for a stream.
	Stream bool
	// Framing names a stream's framing when the protocol has more than
	// one (Gemini: "sse" with ?alt=sse, "" for its JSON array): the stored
	// bytes are the framing's, so each has its own entry.
	Framing string
	// Body is the client's JSON body (already validated by the handler).
	Body []byte
	// Header holds the request's headers: Cache-Control is read, and the
	// KeyHeaders are part of the key.
	Header map[string][]string
}

// key hashes r's question: version, scope, protocol, model, stream, the
// answer-changing headers, and the canonical body; skip replaces one value
// of the body with a marker (the semantic group leaves the last user
// message out).
func (r *Request) key(global bool, skip string) string {
	h := sha256.New()
	var scratch [2048]byte
	c := &canon{h: h, skip: skip, buf: scratch[:0]}
	c.tag('v', keyVersion)
	if global {
		c.tag('g', "")
	} else {
		c.tag('T', r.Tenant)
	}
	c.tag('p', r.Protocol)
	c.tag('m', r.Model)
	if r.Stream {
		c.tag('S', "")
	}
	if r.Framing != "" {
		c.tag('f', r.Framing)
	}
	for _, k := range KeyHeaders {
		for _, v := range r.Header[k] {
			c.tag('h', k+":"+v)
		}
	}
	root := gjson.ParseBytes(r.Body)
	if root.IsObject() {
		c.object(root, "", true)
	} else {
		c.value(root, "")
	}
	c.flush()
	return hex.EncodeToString(h.Sum(nil))
}

// Sampled reports whether r asks for a sampled (non-deterministic)
// answer: a temperature above 0, or none where the protocol's default is
// above 0 (OpenAI, Anthropic and Gemini all default to 1.0). A
// temperature that is not a number counts as sampled. Embeddings are never
// sampled.
func (r *Request) Sampled() bool {
	path := "temperature"
	switch r.Protocol {
	case ProtoEmbeddings:
		return false
	case ProtoGemini:
		path = "generationConfig.temperature"
	}
	t := gjson.GetBytes(r.Body, path)
	if t.Type != gjson.Number {
		return true
	}
	return t.Float() > 0
}

// lastUser finds the text of r's last user message for the semantic
// cache: the text and the gjson path of the value it came from. ok is
// false when the request has none, or when that message holds anything
// but text (an image would not be in its embedding).
func (r *Request) lastUser() (text, path string, ok bool) {
	root := gjson.ParseBytes(r.Body)
	switch r.Protocol {
	case ProtoChat, ProtoMessages:
		return lastRole(root, "messages", "content", "user", "text")
	case ProtoResponses:
		in := root.Get("input")
		if in.Type == gjson.String {
			return in.Str, "input", in.Str != ""
		}
		return lastRole(root, "input", "content", "user", "input_text")
	case ProtoCompletions:
		p := root.Get("prompt")
		return p.Str, "prompt", p.Type == gjson.String && p.Str != ""
	case ProtoGemini:
		return lastRole(root, "contents", "parts", "user", "")
	}
	return "", "", false
}

// lastRole reads the last item of list whose role is role: its field
// (a string, or parts of type partType, or Gemini parts with text).
func lastRole(root gjson.Result, list, field, role, partType string) (string, string, bool) {
	items := root.Get(list).Array()
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		if it.Get("role").Str != role {
			continue
		}
		path := list + "." + strconv.Itoa(i) + "." + field
		v := it.Get(field)
		if v.Type == gjson.String {
			return v.Str, path, v.Str != ""
		}
		if !v.IsArray() {
			return "", "", false
		}
		var b strings.Builder
		ok := true
		v.ForEach(func(_, p gjson.Result) bool {
			t := p.Get("text")
			if t.Type != gjson.String || partType != "" && p.Get("type").Str != partType {
				ok = false
				return false
			}
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(t.Str)
			return true
		})
		if !ok || b.Len() == 0 {
			return "", "", false
		}
		return b.String(), path, true
	}
	return "", "", false
}
