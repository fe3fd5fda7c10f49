package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"switchboard/internal/sse"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Golden cases live in testdata/<pair>/<case>.in.json (or .in.sse for a
// recorded upstream stream) with the expected result beside it in
// <case>.golden.json (or .golden.sse). The case name's prefix says what is
// translated:
//
//	req_     the client's request -> the upstream request, or a refusal
//	resp_    the upstream's unary answer -> the client's answer and usage
//	stream_  the upstream's event stream -> the client's event stream;
//	         <case>.req.json, when present, is the client's request
//	err_     {"status":N,"body":...} upstream error -> the client's error
//
// Run `go test ./internal/translate -run Golden -update` to rewrite.

const testCreated = 1700000000

// pair runs one protocol pair's cases.
type pair struct {
	req    func(in []byte) ([]byte, error)
	resp   func(req, in []byte) ([]byte, Usage, error)
	stream func(req, in []byte) ([]byte, error)
	err    func(status int, body []byte) []byte
}

var defaultStreamReq = []byte(`{"model":"test-model","messages":[{"role":"user","content":"hi"}],"stream":true}`)

var pairs = map[string]pair{
	"openai_anthropic": {
		req: func(in []byte) ([]byte, error) {
			t, err := NewOpenAIAnthropic(in)
			if err != nil {
				return nil, err
			}
			return t.Body(), nil
		},
		resp: func(req, in []byte) ([]byte, Usage, error) {
			return mustAnthropic(req).Response(in)
		},
		stream: func(req, in []byte) ([]byte, error) {
			return readAll(NewReader(io.NopCloser(bytes.NewReader(in)), mustAnthropic(req).Stream()))
		},
		err: AnthropicErrorToOpenAI,
	},
	"openai_gemini": {
		req: func(in []byte) ([]byte, error) {
			t, err := NewOpenAIGemini(in)
			if err != nil {
				return nil, err
			}
			return t.Body(), nil
		},
		resp: func(req, in []byte) ([]byte, Usage, error) {
			return mustGemini(req).Response(in)
		},
		stream: func(req, in []byte) ([]byte, error) {
			return readAll(NewReader(io.NopCloser(bytes.NewReader(in)), mustGemini(req).Stream()))
		},
		err: GeminiErrorToOpenAI,
	},
	"openai_converse": {
		req: func(in []byte) ([]byte, error) {
			t, err := NewOpenAIConverse(in)
			if err != nil {
				return nil, err
			}
			return t.Body(), nil
		},
		resp: func(req, in []byte) ([]byte, Usage, error) {
			return mustConverse(req).Response(in)
		},
		stream: func(req, in []byte) ([]byte, error) {
			return readAll(NewReader(io.NopCloser(bytes.NewReader(in)), mustConverse(req).Stream()))
		},
		err: func(status int, body []byte) []byte {
			typ := BedrockErrorType("", body)
			return BedrockErrorToOpenAI(BedrockErrorStatus(typ, status), typ, body)
		},
	},
	"anthropic_openai": {
		req: MessagesToChat,
		resp: func(req, in []byte) ([]byte, Usage, error) {
			return ChatToMessages(in, "claude-client-model")
		},
		stream: messagesStreamSSE,
		err:    ErrorToAnthropic,
	},
}

func mustAnthropic(req []byte) *OpenAIAnthropic {
	t, err := NewOpenAIAnthropic(req)
	if err != nil {
		panic(err)
	}
	t.Created = testCreated
	return t
}

func mustConverse(req []byte) *OpenAIConverse {
	t, err := NewOpenAIConverse(req)
	if err != nil {
		panic(err)
	}
	t.Created, t.ID = testCreated, "chatcmpl-test"
	return t
}

func mustGemini(req []byte) *OpenAIGemini {
	t, err := NewOpenAIGemini(req)
	if err != nil {
		panic(err)
	}
	t.Created, t.ID = testCreated, "chatcmpl-test"
	return t
}

// readAll drains a translating reader and appends its usage and ending as
// comment lines, so goldens pin them too.
func readAll(r *Reader) ([]byte, error) {
	out, err := io.ReadAll(r)
	u, _ := json.Marshal(r.Usage())
	out = fmt.Appendf(out, ": usage %s\n", u)
	if err != nil {
		out = fmt.Appendf(out, ": error %v\n", err)
	}
	return out, nil
}

// messagesStreamSSE runs an OpenAI stream through MessagesStream the way
// the /v1/messages handler does, writing Anthropic's SSE.
func messagesStreamSSE(_ []byte, in []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := sse.NewWriter(&buf)
	s := NewMessagesStream("claude-client-model")
	r := sse.NewReader(bytes.NewReader(in))
	for {
		ev, err := r.Next()
		if err != nil {
			break
		}
		evs, err := s.Chunk(ev.Data)
		if err != nil {
			fmt.Fprintf(&buf, ": error %v\n", err)
			break
		}
		for _, e := range evs {
			_ = w.Event(e.Name, e.Data)
		}
	}
	for _, e := range s.Finish() {
		_ = w.Event(e.Name, e.Data)
	}
	u, _ := json.Marshal(s.Usage())
	fmt.Fprintf(&buf, ": usage %s\n", u)
	return buf.Bytes(), nil
}

// refusalJSON is the golden form of a refused request or failed answer.
func refusalJSON(err error) []byte {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fmt.Appendf(nil, `{"status":%d,"body":%s}`, fe.Status(), fe.OpenAIBody())
	}
	var ue *UpstreamError
	if errors.As(err, &ue) {
		return fmt.Appendf(nil, `{"status":%d,"body":%s}`, ue.Status, ue.Body)
	}
	b, _ := json.Marshal(map[string]string{"error": err.Error()})
	return b
}

func TestGolden(t *testing.T) {
	names := make([]string, 0, len(pairs))
	for n := range pairs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		p := pairs[name]
		dir := filepath.Join("testdata", name)
		files, _ := filepath.Glob(filepath.Join(dir, "*.in.*"))
		if len(files) == 0 {
			t.Errorf("%s: no golden cases", dir)
		}
		for _, f := range files {
			base := filepath.Base(f)
			c := base[:strings.Index(base, ".in.")]
			ext := filepath.Ext(f)
			t.Run(name+"/"+c, func(t *testing.T) {
				in, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				got := runCase(t, p, dir, c, in)
				if ext == ".json" {
					var pretty bytes.Buffer
					if err := json.Indent(&pretty, got, "", "  "); err != nil {
						t.Fatalf("output is not JSON: %v\n%s", err, got)
					}
					got = append(pretty.Bytes(), '\n')
				}
				golden := filepath.Join(dir, c+".golden"+ext)
				if *update {
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run with -update to create)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from golden:\n--- got\n%s\n--- want\n%s", c, got, want)
				}
			})
		}
	}
}

func runCase(t *testing.T, p pair, dir, c string, in []byte) []byte {
	switch {
	case strings.HasPrefix(c, "req_"):
		out, err := p.req(in)
		if err != nil {
			return refusalJSON(err)
		}
		return out
	case strings.HasPrefix(c, "resp_"):
		req, _ := os.ReadFile(filepath.Join(dir, c+".req.json"))
		if req == nil {
			req = []byte(`{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`)
		}
		out, u, err := p.resp(req, in)
		if err != nil {
			return refusalJSON(err)
		}
		ub, _ := json.Marshal(u)
		return fmt.Appendf(nil, `{"body":%s,"usage":%s}`, out, ub)
	case strings.HasPrefix(c, "stream_"):
		req, _ := os.ReadFile(filepath.Join(dir, c+".req.json"))
		if req == nil {
			req = defaultStreamReq
		}
		out, err := p.stream(req, in)
		if err != nil {
			t.Fatal(err)
		}
		return out
	case strings.HasPrefix(c, "err_"):
		var e struct {
			Status int             `json:"status"`
			Body   json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(in, &e); err != nil {
			t.Fatal(err)
		}
		body := []byte(e.Body)
		var s string
		if json.Unmarshal(e.Body, &s) == nil {
			body = []byte(s) // a non-JSON upstream body, given as a string
		}
		return fmt.Appendf(nil, `{"status":%d,"body":%s}`, e.Status, p.err(e.Status, body))
	}
	t.Fatalf("case %s: unknown prefix", c)
	return nil
}

func TestAnthropicToolIDsFromOtherProviders(t *testing.T) {
	body := []byte(`{"model":"claude","max_tokens":10,"messages":[
		{"role":"user","content":"weather?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"functions.get_weather:0","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"functions.get_weather:0","content":"sunny"}],
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`)
	tr, err := NewOpenAIAnthropic(body)
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Messages []struct {
			Content []struct {
				Type      string `json:"type"`
				ID        string `json:"id"`
				ToolUseID string `json:"tool_use_id"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(tr.Body(), &req); err != nil {
		t.Fatal(err)
	}
	use, result := req.Messages[1].Content[0].ID, req.Messages[2].Content[0].ToolUseID
	if use == "" || use != result || !regexp.MustCompile(`^[a-zA-Z0-9_-]+$`).MatchString(use) {
		t.Fatalf("tool_use id %q, tool_result id %q", use, result)
	}
	if anthropicToolID("toolu_01AbC-x") != "toolu_01AbC-x" {
		t.Fatal("a valid id was changed")
	}
}
