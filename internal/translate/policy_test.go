package translate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"switchboard/internal/sse"
)

func TestDroppedHeader(t *testing.T) {
	long := make([]string, 200)
	for i := range long {
		long[i] = "tools[" + strings.Repeat("9", 3) + "].field" + strings.Repeat("x", i%7) + string(rune('a'+i%26))
	}
	tests := []struct {
		name string
		in   []string
		want string
	}{
		{"nothing", nil, ""},
		{"indices collapse and repeats go", []string{"store", "messages[0].content[1].cache_control", "messages[12].content[0].cache_control", "store"},
			"store, messages[].content[].cache_control"},
		{"order kept", []string{"thinking.display", "context_management"}, "thinking.display, context_management"},
	}
	for _, tt := range tests {
		if got := DroppedHeader(tt.in); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	got := DroppedHeader(long)
	if len(got) > DroppedHeaderMax || !strings.HasSuffix(got, "...") {
		t.Errorf("long list: %d bytes, ends %q", len(got), got[len(got)-10:])
	}
	for _, c := range got {
		if c < 0x20 || c > 0x7e {
			t.Fatalf("header value holds %q", c)
		}
	}
}

// TestCapturesTranslate: the requests current coding agents send are
// served by every provider type: the inbound translation refuses nothing,
// and the internal form it makes passes the anthropic and gemini provider
// translators too.
func TestCapturesTranslate(t *testing.T) {
	for _, c := range []struct {
		file string
		in   func([]byte) (*Inbound, error)
	}{
		{"anthropic_openai/req_capture_claude_code.in.json", FromMessages},
		{"responses_openai/req_capture_codex.in.json", func(b []byte) (*Inbound, error) {
			r, err := FromResponses(b)
			if err != nil {
				return nil, err
			}
			return &r.Inbound, nil
		}},
		{"gemini_openai/req_capture_gemini_cli.in.json", func(b []byte) (*Inbound, error) {
			g, err := FromGemini(b, "gemini-3.5-flash-lite", false)
			if err != nil {
				return nil, err
			}
			return &g.Inbound, nil
		}},
		{"gemini_openai/req_capture_gemini_cli_stream.in.json", func(b []byte) (*Inbound, error) {
			g, err := FromGemini(b, "gemini-3.1-pro-preview", true)
			if err != nil {
				return nil, err
			}
			return &g.Inbound, nil
		}},
	} {
		t.Run(c.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", c.file))
			if err != nil {
				t.Fatal(err)
			}
			in, err := c.in(b)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if _, err := NewOpenAIGemini(in.Body); err != nil {
				t.Errorf("gemini provider refuses the internal form: %v", err)
			}
			if strings.Contains(c.file, "gemini_cli.in") {
				return // a JSON schema answer: anthropic providers refuse response_format (documented)
			}
			if _, err := NewOpenAIAnthropic(in.Body); err != nil {
				t.Errorf("anthropic provider refuses the internal form: %v", err)
			}
		})
	}
}

func TestGeminiArrayFraming(t *testing.T) {
	in, _ := os.ReadFile(filepath.Join("testdata", "gemini_openai", "stream_tool_calls.in.sse"))
	s := mustFromGemini(pairs["gemini_openai"].defaultStreamReq).Stream("")
	var a GeminiArray
	var out bytes.Buffer
	r := sse.NewReader(bytes.NewReader(in))
	for {
		ev, err := r.Next()
		if err != nil {
			break
		}
		evs, err := s.Chunk(ev.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			out.Write(a.Item(e.Data))
		}
	}
	out.Write(a.Close())
	var arr []map[string]any
	if err := json.Unmarshal(out.Bytes(), &arr); err != nil || len(arr) != 3 {
		t.Fatalf("%d elements, %v:\n%s", len(arr), err, out.Bytes())
	}
	if !bytes.Contains(out.Bytes(), []byte("}\r\n,{")) && !bytes.Contains(out.Bytes(), []byte(",\r\n{")) {
		t.Errorf("elements not separated as Gemini does:\n%s", out.Bytes())
	}
	var empty GeminiArray
	if string(empty.Close()) != "[]" {
		t.Errorf("empty array %q", empty.Close())
	}
}

func TestJSONSchema(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"object","properties":{"a":{"type":"string"}}}`},
		{`{"type":"OBJECT","propertyOrdering":["b","a"],"properties":{"b":{"type":"INTEGER","nullable":true},"a":{"type":"ARRAY","items":{"type":"STRING"}}}}`,
			`{"type":"object","properties":{"b":{"type":["integer","null"]},"a":{"type":"array","items":{"type":"string"}}}}`},
		{`{"anyOf":[{"type":"STRING"},{"type":"NULL"}],"enum":["OBJECT"],"default":{"type":"KEEP"}}`,
			`{"anyOf":[{"type":"string"},{"type":"null"}],"enum":["OBJECT"],"default":{"type":"KEEP"}}`},
		{`{"type":["STRING","null"],"nullable":true,"$defs":{"x":{"type":"NUMBER"}},"additionalProperties":false}`,
			`{"type":["string","null"],"$defs":{"x":{"type":"number"}},"additionalProperties":false}`},
		{`{"properties":{"we\"ird.key*":{"type":"BOOLEAN"}}}`, `{"properties":{"we\"ird.key*":{"type":"boolean"}}}`},
	}
	for _, tt := range tests {
		got, err := jsonSchema(json.RawMessage(tt.in), "s")
		if err != nil || string(got) != tt.want {
			t.Errorf("%s:\n got %s %v\nwant %s", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{`[]`, `"x"`, `{`, strings.Repeat(`{"items":`, 200) + `{}` + strings.Repeat(`}`, 200)} {
		if _, err := jsonSchema(json.RawMessage(bad), "s"); err == nil {
			t.Errorf("%.40s: accepted", bad)
		}
	}
}

func TestErrorShapes(t *testing.T) {
	for status, want := range map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
		404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 529: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"} {
		if got := GoogleStatus(status); got != want {
			t.Errorf("%d: %s, want %s", status, got, want)
		}
	}
	fe := &FieldError{Field: "contents", Msg: "required"}
	if got := string(fe.GeminiBody()); got != `{"error":{"code":400,"message":"contents: required","status":"INVALID_ARGUMENT"}}` {
		t.Errorf("gemini refusal %s", got)
	}
	if got := string(MessagesTokenCount(42)); got != `{"input_tokens":42}` {
		t.Errorf("count_tokens %s", got)
	}
	if got := string(GeminiTokenCount(42)); got != `{"totalTokens":42}` {
		t.Errorf("countTokens %s", got)
	}
	ev := ResponsesErrorEvent(429, OpenAIError(429, "slow down", "", ""))
	if ev.Name != "error" || string(ev.Data) != `{"type":"error","sequence_number":0,"code":"rate_limit_exceeded","message":"slow down","param":null}` {
		t.Errorf("responses error event %s %s", ev.Name, ev.Data)
	}
}

// TestFailEndsEveryClientStream: a failure after the stream started ends
// it with the client protocol's error event, once; nothing follows.
func TestFailEndsEveryClientStream(t *testing.T) {
	chunk := []byte(`{"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"}}]}`)
	body := OpenAIError(504, "the provider stopped answering", "", "")
	r := mustFromResponses(pairs["responses_openai"].defaultStreamReq)
	g := mustFromGemini(pairs["gemini_openai"].defaultStreamReq)
	for _, c := range []struct {
		s        ClientStream
		name     string
		contains string
	}{
		{NewMessagesStream("m"), "error", `"type":"api_error","message":"the provider stopped answering"`},
		{r.Stream(""), "response.failed", `"status":"failed","background":false,"error":{"code":"server_error","message":"the provider stopped answering"}`},
		{g.Stream(""), "", `{"error":{"code":504,"message":"the provider stopped answering","status":"DEADLINE_EXCEEDED"}}`},
	} {
		if _, err := c.s.Chunk(chunk); err != nil {
			t.Fatal(err)
		}
		evs := c.s.Fail(504, body)
		if len(evs) != 1 || evs[0].Name != c.name || !bytes.Contains(evs[0].Data, []byte(c.contains)) {
			t.Errorf("%T: %+v", c.s, evs)
			continue
		}
		if more := append(c.s.Finish(), c.s.Fail(500, body)...); len(more) != 0 {
			t.Errorf("%T: events after the failure: %d", c.s, len(more))
		}
		if evs, _ := c.s.Chunk(chunk); len(evs) != 0 {
			t.Errorf("%T: a chunk after the failure was translated", c.s)
		}
	}
}

// TestErrorChunkTypes: an error chunk's type chooses the status, in
// either vocabulary, so a client sees the kind of failure it was.
func TestErrorChunkTypes(t *testing.T) {
	for typ, want := range map[string]string{"rate_limit_exceeded": "rate_limit_error", "insufficient_quota": "rate_limit_error",
		"overloaded_error": "overloaded_error", "invalid_request_error": "invalid_request_error", "whatever": "api_error"} {
		s := NewMessagesStream("m")
		evs, err := s.Chunk([]byte(`{"error":{"message":"x","type":"` + typ + `"}}`))
		if err != nil || len(evs) != 1 || !bytes.Contains(evs[0].Data, []byte(`"type":"`+want+`"`)) {
			t.Errorf("%s: %v %s", typ, err, evs)
		}
	}
}
