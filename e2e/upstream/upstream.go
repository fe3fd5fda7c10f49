// Package upstream holds fake LLM provider APIs for end-to-end tests of
// real clients through the gateway: Anthropic Messages, OpenAI chat
// completions and Responses, and Gemini generateContent. Each speaks its
// vendor's wire protocol (unary JSON and the vendor's own stream framing
// and event sequence), refuses what the real API refuses (an unknown
// field, a tool result without its call, a missing key) with the vendor's
// error shape, and plays a scripted model: on the first turn it asks for a
// tool the request offers, and once the conversation carries that tool's
// result it answers with text quoting the marker found in the result, so a
// test can tell that a client really ran the tool and sent its output
// back.
package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Vendor names a provider API.
type Vendor string

const (
	Anthropic Vendor = "anthropic"
	OpenAI    Vendor = "openai" // chat completions and Responses
	Gemini    Vendor = "gemini"
)

// MarkerPattern is what the fake model looks for in tool results and user
// text: tests plant a random marker (in a file an agent must read, in a
// prompt) and expect the answer to quote it.
var MarkerPattern = regexp.MustCompile(`SBX-[0-9a-z]{6,40}`)

// RefuseWord in the last user text makes the fake answer 400 in the
// vendor's error shape, as the real API does for a request it rejects.
const RefuseWord = "SBX-REFUSE"

// ToolCall is a tool the fake model asks for when the request offers a
// tool of that name.
type ToolCall struct {
	Name string
	Args map[string]any
}

// Options configures a fake.
type Options struct {
	// Key is the API key the fake accepts (x-api-key, Bearer or
	// x-goog-api-key / ?key= by vendor); empty accepts any non-empty key.
	Key string
	// Tools lists the tool calls the model may ask for, by preference: the
	// first one whose name the request offers is called.
	Tools []ToolCall
	// Latency delays every answer's first byte (and each streamed event by
	// a tenth of it).
	Latency time.Duration
}

// Request is one request the fake received, kept for assertions.
type Request struct {
	Method string
	Path   string
	Query  string
	Header http.Header
	Body   []byte
	Status int    // the status the fake answered (0 while it answers)
	Answer []byte // the start of an error answer (status 400 and above)
}

// maxBody bounds a request body; maxKept bounds the requests recorded.
const (
	maxBody = 32 << 20
	maxKept = 500
)

// Server is one fake vendor API on a loopback port.
type Server struct {
	*httptest.Server
	vendor Vendor
	opts   Options
	seq    atomic.Int64

	mu   sync.Mutex
	reqs []*Request
}

// New starts a fake of vendor v.
func New(v Vendor, o Options) *Server {
	s := &Server{vendor: v, opts: o}
	var h http.HandlerFunc
	switch v {
	case Anthropic:
		h = s.anthropic
	case OpenAI:
		h = s.openai
	case Gemini:
		h = s.gemini
	default:
		panic("upstream: unknown vendor " + string(v))
	}
	s.Server = httptest.NewServer(s.record(h))
	return s
}

// Vendor is the API this fake speaks.
func (s *Server) Vendor() Vendor { return s.vendor }

// BaseURL is the base_url a gateway provider of this vendor's type is
// configured with (the API root including its version).
func (s *Server) BaseURL() string {
	if s.vendor == Gemini {
		return s.URL + "/v1beta"
	}
	return s.URL + "/v1"
}

// Requests returns a copy of the requests received so far, in arrival
// order; one still being answered has Status 0.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = *r
	}
	return out
}

// Reset forgets the recorded requests.
func (s *Server) Reset() {
	s.mu.Lock()
	s.reqs = nil
	s.mu.Unlock()
}

// statusWriter remembers the status written, for the record.
type statusWriter struct {
	http.ResponseWriter
	status int
	answer []byte
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if room := 1024 - len(w.answer); w.status >= 400 && room > 0 {
		w.answer = append(w.answer, p[:min(len(p), room)]...)
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// record reads the body (bounded), keeps the request in arrival order,
// runs h and then notes the answer's status.
func (s *Server) record(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil || len(body) > maxBody {
			http.Error(w, "body unreadable or too large", http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
		s.mu.Lock()
		if len(s.reqs) < maxKept {
			s.reqs = append(s.reqs, rec)
		}
		s.mu.Unlock()
		sw := &statusWriter{ResponseWriter: w}
		if s.opts.Latency > 0 {
			time.Sleep(s.opts.Latency)
		}
		h(sw, r)
		s.mu.Lock()
		rec.Status, rec.Answer = sw.status, sw.answer
		s.mu.Unlock()
	})
}

// id makes a vendor-looking id, unique within this fake.
func (s *Server) id(prefix string) string {
	return fmt.Sprintf("%s%012d", prefix, s.seq.Add(1))
}

// pause is the delay between streamed events.
func (s *Server) pause() {
	if s.opts.Latency > 0 {
		time.Sleep(s.opts.Latency / 10)
	}
}

// turn is what the fake model reads of a request, whatever its protocol.
type turn struct {
	offered     []string // tool names the request offers
	toolResults []string // text of every tool result in the conversation
	lastUser    string   // text of the last user message
	jsonSchema  any      // a structured-output schema, when one is required
	jsonMode    bool
}

// reply is what the fake model answers.
type reply struct {
	text string
	call *ToolCall
	json bool // text is a JSON document
}

// decide plays the scripted model: a tool result in the conversation is
// answered with its marker; else an offered tool from the script is
// called; else the marker of the last user text is acknowledged.
func (s *Server) decide(t turn) reply {
	if len(t.toolResults) > 0 {
		all := strings.Join(t.toolResults, "\n")
		if m := MarkerPattern.FindString(all); m != "" {
			return reply{text: "The tool said " + m + "."}
		}
		return reply{text: "The tool result held no marker."}
	}
	if t.jsonMode {
		b, _ := json.Marshal(fill(t.jsonSchema))
		return reply{text: string(b), json: true}
	}
	for _, c := range s.opts.Tools {
		for _, name := range t.offered {
			if name == c.Name {
				c := c
				return reply{call: &c}
			}
		}
	}
	if m := MarkerPattern.FindString(t.lastUser); m != "" && m != RefuseWord {
		return reply{text: "ack " + m}
	}
	return reply{text: "pong"}
}

// refused reports whether the request asks the fake to refuse it.
func (t turn) refused() bool { return strings.Contains(t.lastUser, RefuseWord) }

// fill makes a value that satisfies a JSON schema (the subset structured
// output uses: object, array, string, number, integer, boolean, enum), in
// either the JSON Schema or Gemini's OpenAPI spelling of types.
func fill(schema any) any {
	m, _ := schema.(map[string]any)
	if m == nil {
		return map[string]any{}
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	typ, _ := m["type"].(string)
	if l, ok := m["type"].([]any); ok && len(l) > 0 {
		typ, _ = l[0].(string)
	}
	switch strings.ToLower(typ) {
	case "string":
		return "ok"
	case "integer", "number":
		return 1
	case "boolean":
		return true
	case "array":
		return []any{}
	case "null":
		return nil
	}
	out := map[string]any{}
	props, _ := m["properties"].(map[string]any)
	for k, v := range props {
		out[k] = fill(v)
	}
	return out
}

// chunks splits s into about n pieces on rune boundaries, for streaming.
func chunks(s string, n int) []string {
	r := []rune(s)
	if len(r) == 0 {
		return nil
	}
	size := (len(r) + n - 1) / n
	var out []string
	for i := 0; i < len(r); i += size {
		end := min(i+size, len(r))
		out = append(out, string(r[i:end]))
	}
	return out
}

// estimate is the fake's token count of a body: a quarter of its bytes.
func estimate(b []byte) int { return len(b)/4 + 1 }

// words counts the tokens of an answer the same rough way.
func words(s string) int { return len(s)/4 + 1 }

// decodeObject decodes a JSON object body; the error names what is wrong.
func decodeObject(b []byte) (map[string]any, error) {
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("the body is not valid JSON: %v", err)
	}
	if m == nil {
		return nil, fmt.Errorf("the body is not a JSON object")
	}
	if d.More() {
		return nil, fmt.Errorf("the body has data after its JSON object")
	}
	return m, nil
}

// unknownField returns the first key of m (sorted) that allowed lacks.
func unknownField(m map[string]any, allowed map[string]bool) string {
	var bad []string
	for k := range m {
		if !allowed[k] {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	first := bad[0]
	for _, k := range bad[1:] {
		if k < first {
			first = k
		}
	}
	return first
}

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// text flattens a content value (a string, or a list of parts with a text
// field, nested content included) to its text.
func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var b strings.Builder
		for _, p := range x {
			if t := text(p); t != "" {
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(t)
			}
		}
		return b.String()
	case map[string]any:
		if t, ok := x["text"].(string); ok {
			return t
		}
		for _, k := range []string{"content", "output", "response"} {
			if c, ok := x[k]; ok {
				if s := text(c); s != "" {
					return s
				}
			}
		}
		if _, ok := x["type"]; !ok {
			b, _ := json.Marshal(x)
			return string(b)
		}
	}
	return ""
}

// list returns v as a list of objects (others skipped).
func list(v any) []map[string]any {
	l, _ := v.([]any)
	out := make([]map[string]any, 0, len(l))
	for _, e := range l {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// str reads a string field.
func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// sse writes server-sent events and flushes each, as the vendors do.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// event writes one event; name may be empty (a data-only event). sep is
// the event separator ("\n\n", or "\r\n\r\n" as Gemini writes it).
func (e *sse) event(name string, v any, sep string) {
	var b []byte
	switch x := v.(type) {
	case string:
		b = []byte(x)
	default:
		b, _ = json.Marshal(v)
	}
	if name != "" {
		fmt.Fprintf(e.w, "event: %s\n", name)
	}
	fmt.Fprintf(e.w, "data: %s%s", b, sep)
	if e.f != nil {
		e.f.Flush()
	}
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) string {
	a := r.Header.Get("Authorization")
	if len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

// keyOK checks a presented key against the configured one.
func (s *Server) keyOK(k string) bool {
	if k == "" {
		return false
	}
	return s.opts.Key == "" || k == s.opts.Key
}

// readBody returns the body record already read and replaced.
func readBody(r *http.Request) ([]byte, error) { return io.ReadAll(r.Body) }

// integer reads a JSON integer decoded with UseNumber.
func integer(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}
