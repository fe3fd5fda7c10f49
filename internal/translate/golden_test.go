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

// pair runs one protocol pair's cases. req returns the translated body
// and the paths of the hints it dropped; a req golden holds the body, or
// {"body":...,"dropped":[...]} when something was dropped.
type pair struct {
	req    func(c string, in []byte) ([]byte, []string, error)
	resp   func(req, in []byte) ([]byte, Usage, error)
	stream func(req, in []byte) ([]byte, error)
	err    func(status int, body []byte) []byte
	// defaultReq and defaultStreamReq replace the chat requests that
	// resp_ and stream_ cases without a .req.json use.
	defaultReq, defaultStreamReq []byte
	// refusal is a refused request's body in the client's protocol
	// (OpenAI's when nil).
	refusal func(*FieldError) []byte
}

var defaultStreamReq = []byte(`{"model":"test-model","messages":[{"role":"user","content":"hi"}],"stream":true}`)

var pairs = map[string]pair{
	"openai_anthropic": {
		req: func(_ string, in []byte) ([]byte, []string, error) {
			t, err := NewOpenAIAnthropic(in)
			if err != nil {
				return nil, nil, err
			}
			return t.Body(), t.Dropped(), nil
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
		req: func(_ string, in []byte) ([]byte, []string, error) {
			t, err := NewOpenAIGemini(in)
			if err != nil {
				return nil, nil, err
			}
			return t.Body(), t.Dropped(), nil
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
		req: func(_ string, in []byte) ([]byte, []string, error) {
			t, err := NewOpenAIConverse(in)
			if err != nil {
				return nil, nil, err
			}
			return t.Body(), t.Dropped(), nil
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
		req: func(_ string, in []byte) ([]byte, []string, error) {
			return inbound(FromMessages(in))
		},
		resp: func(req, in []byte) ([]byte, Usage, error) {
			return ChatToMessages(in, "claude-client-model")
		},
		stream: func(_, in []byte) ([]byte, error) {
			return clientStreamSSE(NewMessagesStream("claude-client-model"), in), nil
		},
		err:     ErrorToAnthropic,
		refusal: (*FieldError).AnthropicBody,
	},
	"gemini_openai": {
		req: func(c string, in []byte) ([]byte, []string, error) {
			// A case named for a stream is a streamGenerateContent call.
			g, err := FromGemini(in, "gemini-client-model", strings.Contains(c, "stream"))
			if err != nil {
				return nil, nil, err
			}
			return g.Body, g.Dropped, nil
		},
		resp: func(req, in []byte) ([]byte, Usage, error) {
			return mustFromGemini(req).Answer(in, "")
		},
		stream: func(req, in []byte) ([]byte, error) {
			return clientStreamSSE(mustFromGemini(req).Stream(""), in), nil
		},
		err:              ErrorToGemini,
		refusal:          (*FieldError).GeminiBody,
		defaultReq:       []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`),
		defaultStreamReq: []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`),
	},
	"responses_openai": {
		req: func(_ string, in []byte) ([]byte, []string, error) {
			r, err := FromResponses(in)
			if err != nil {
				return nil, nil, err
			}
			return r.Body, r.Dropped, nil
		},
		resp: func(req, in []byte) ([]byte, Usage, error) {
			return mustFromResponses(req).Answer(in, "")
		},
		stream: func(req, in []byte) ([]byte, error) {
			return clientStreamSSE(mustFromResponses(req).Stream(""), in), nil
		},
		defaultReq:       []byte(`{"model":"gpt-client-model","input":"hi"}`),
		defaultStreamReq: []byte(`{"model":"gpt-client-model","input":"hi","stream":true}`),
	},
}

func mustFromResponses(req []byte) *ResponsesInbound {
	r, err := FromResponses(req)
	if err != nil {
		panic(err)
	}
	r.Created = testCreated
	return r
}

func mustFromGemini(req []byte) *GeminiInbound {
	g, err := FromGemini(req, "gemini-client-model", true)
	if err != nil {
		panic(err)
	}
	return g
}

func inbound(in *Inbound, err error) ([]byte, []string, error) {
	if err != nil {
		return nil, nil, err
	}
	return in.Body, in.Dropped, nil
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

// clientStreamSSE runs an internal chunk stream through a ClientStream
// the way a handler does, writing the client's events as SSE; a read
// that ends without [DONE] (a cut) ends the stream with Fail.
func clientStreamSSE(s ClientStream, in []byte) []byte {
	var buf bytes.Buffer
	w := sse.NewWriter(&buf)
	write := func(evs []Event) {
		for _, e := range evs {
			_ = w.Event(e.Name, e.Data)
		}
	}
	r := sse.NewReader(bytes.NewReader(in))
	done := false
	for !done {
		ev, err := r.Next()
		if err != nil {
			write(s.Fail(502, []byte(`{"error":{"message":"upstream stream cut","type":"server_error"}}`)))
			break
		}
		done = ev.Done()
		evs, err := s.Chunk(ev.Data)
		if err != nil {
			fmt.Fprintf(&buf, ": error %v\n", err)
			break
		}
		write(evs)
	}
	write(s.Finish())
	u, _ := json.Marshal(s.Usage())
	fmt.Fprintf(&buf, ": usage %s\n", u)
	return buf.Bytes()
}

// refusalJSON is the golden form of a refused request or failed answer.
func refusalJSON(err error, body func(*FieldError) []byte) []byte {
	var fe *FieldError
	if errors.As(err, &fe) {
		if body == nil {
			body = (*FieldError).OpenAIBody
		}
		return fmt.Appendf(nil, `{"status":%d,"body":%s}`, fe.Status(), body(fe))
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
		out, dropped, err := p.req(c, in)
		if err != nil {
			return refusalJSON(err, p.refusal)
		}
		if len(dropped) > 0 {
			d, _ := json.Marshal(dropped)
			return fmt.Appendf(nil, `{"body":%s,"dropped":%s}`, out, d)
		}
		return out
	case strings.HasPrefix(c, "resp_"):
		req, _ := os.ReadFile(filepath.Join(dir, c+".req.json"))
		if req == nil {
			req = []byte(`{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`)
			if p.defaultReq != nil {
				req = p.defaultReq
			}
		}
		out, u, err := p.resp(req, in)
		if err != nil {
			return refusalJSON(err, nil)
		}
		ub, _ := json.Marshal(u)
		return fmt.Appendf(nil, `{"body":%s,"usage":%s}`, out, ub)
	case strings.HasPrefix(c, "stream_"):
		req, _ := os.ReadFile(filepath.Join(dir, c+".req.json"))
		if req == nil {
			req = defaultStreamReq
			if p.defaultStreamReq != nil {
				req = p.defaultStreamReq
			}
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
