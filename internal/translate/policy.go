package translate

import (
	"bytes"
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	"switchboard/internal/api/openai"
)

// Inbound is a client request in another protocol (Anthropic Messages,
// Gemini, OpenAI Responses) translated into the internal form.
type Inbound struct {
	// Body is the internal form: an OpenAI chat request. A streaming
	// request asks for usage (stream_options.include_usage) so that the
	// answer can be metered and its last event can carry it.
	Body []byte
	// Model is the model the client named (for Gemini, the URL's).
	Model string
	// Stream is true when the client asked for a stream.
	Stream bool
	// Dropped lists the JSON paths of the hints the translation dropped
	// because the internal form cannot carry them and dropping them does
	// not change what the model is asked (docs/translation.md lists
	// them), in the order met. The handler names them in the
	// X-Switchboard-Dropped header (see DroppedHeader) and a debug log.
	Dropped []string
}

// drops collects the paths of dropped hints; a nil *drops collects none.
type drops struct{ list []string }

func (d *drops) add(path string) {
	if d != nil {
		d.list = append(d.list, path)
	}
}

// addRaw records path when raw holds a value other than null.
func (d *drops) addRaw(path string, raw json.RawMessage) {
	if present(raw) {
		d.add(path)
	}
}

func present(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// DroppedHeaderMax bounds the X-Switchboard-Dropped value.
const DroppedHeaderMax = 1024

var arrayIndex = regexp.MustCompile(`\[\d+\]`)

// DroppedHeader is the X-Switchboard-Dropped value naming the dropped
// hints: array indices collapse ("messages[3].content[0].cache_control"
// becomes "messages[].content[].cache_control"), duplicates go, the rest
// joins with ", " and stops at DroppedHeaderMax bytes ending in "...". ""
// when nothing was dropped. The paths are built from the field names the
// translators know, so the value is plain ASCII.
func DroppedHeader(dropped []string) string {
	seen := make(map[string]bool, len(dropped))
	var b strings.Builder
	for _, p := range dropped {
		p = arrayIndex.ReplaceAllString(p, "[]")
		if seen[p] {
			continue
		}
		seen[p] = true
		sep := ""
		if b.Len() > 0 {
			sep = ", "
		}
		if b.Len()+len(sep)+len(p) > DroppedHeaderMax-3 {
			b.WriteString("...")
			break
		}
		b.WriteString(sep)
		b.WriteString(p)
	}
	return b.String()
}

// refusal is a top-level field refused with a reason.
type refusal string

// classify checks a body's top-level fields: a dropped one is recorded
// in d, a refused one (refusals) or an unknown one (neither in rules nor
// in refusals) refuses the body, naming the first in key order. null
// values count as absent. target completes "not supported by ...".
func classify(body []byte, rules map[string]fieldRule, refusals map[string]refusal, target string, d *drops) error {
	return classifyAt("", body, rules, refusals, target, d)
}

// classifyAt is classify for the object at path (absent or null: nothing
// to check).
func classifyAt(path string, body []byte, rules map[string]fieldRule, refusals map[string]refusal, target string, d *drops) error {
	if path != "" && !present(body) {
		return nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		if path == "" {
			path = "body"
		}
		return &FieldError{Field: path, Msg: "must be a JSON object", Code: "invalid_request"}
	}
	prefix := ""
	if path != "" {
		prefix = path + "."
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !present(top[k]) {
			continue
		}
		if why, ok := refusals[k]; ok {
			return fieldErr(prefix+k, "%s", string(why))
		}
		switch r, ok := rules[k]; {
		case !ok:
			return fieldErr(prefix+k, "not supported by %s", target)
		case r == dropped:
			d.add(prefix + k)
		}
	}
	return nil
}

// ClientStream turns the internal chunk stream (OpenAI chat chunks) into
// one client protocol's events. MessagesStream, ResponsesStream and
// GeminiStream implement it. Values are single-use and not safe for
// concurrent use.
type ClientStream interface {
	// Chunk translates one chunk (an SSE event's data); "[DONE]" is the
	// same as Finish. A chunk carrying an error object ends the stream
	// with the protocol's error event.
	Chunk(data []byte) ([]Event, error)
	// Finish ends a stream that closed cleanly; nothing after the first
	// Finish or Fail is emitted.
	Finish() []Event
	// Fail ends a started stream with the protocol's error event, for a
	// failure after bytes reached the client (an upstream cut, a read
	// timeout). body is an error answer in any shape (normally
	// OpenAI's); status is its HTTP status.
	Fail(status int, body []byte) []Event
	// Usage is the token count reported so far.
	Usage() Usage
}

// nextChunk is what every ClientStream does first with a chunk of the
// internal stream: nothing after the stream finished, Finish at [DONE],
// Fail for a chunk carrying an error (the status chosen by its type).
// ok is true when c is a chunk to translate.
func nextChunk(s ClientStream, finished bool, data []byte) (c openai.ChatCompletionChunk, evs []Event, ok bool, err error) {
	switch {
	case finished:
		return c, nil, false, nil
	case isDone(data):
		return c, s.Finish(), false, nil
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, nil, false, &ProtocolError{Msg: "stream chunk is not JSON"}
	}
	if present(c.Error) {
		var e openai.ErrorBody
		_ = json.Unmarshal(c.Error, &e)
		return c, s.Fail(anthropicErrorStatus(e.Type), marshal(openai.ErrorResponse{Error: e})), false, nil
	}
	return c, nil, true, nil
}

// isDone reports OpenAI's terminal "[DONE]".
func isDone(data []byte) bool { return bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) }

var (
	_ ClientStream = (*MessagesStream)(nil)
	_ ClientStream = (*GeminiStream)(nil)
	_ ClientStream = (*ResponsesStream)(nil)
)
