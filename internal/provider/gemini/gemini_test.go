package gemini

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"switchboard/internal/config"
	"switchboard/internal/provider"
)

const chatReq = `{"model":"gemini-2.5-flash","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}],"max_tokens":50}`

type upstream struct {
	mu     sync.Mutex
	reqs   []*http.Request
	bodies []string
	h      http.HandlerFunc
}

func newUpstream(t *testing.T, h http.HandlerFunc) (*upstream, *Provider) {
	u := &upstream{h: h}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, r)
		u.bodies = append(u.bodies, string(b))
		u.mu.Unlock()
		u.h(w, r)
	}))
	t.Cleanup(srv.Close)
	p := New(&config.Provider{Name: "gem", Type: config.TypeGemini, BaseURL: srv.URL + "/v1beta/",
		APIKeys: []string{"g1", "g2"}}, srv.Client())
	return u, p
}

func jsonAnswer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func sseAnswer(datas ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range datas {
			io.WriteString(w, "data: "+d+"\r\n\r\n")
			w.(http.Flusher).Flush()
		}
	}
}

func send(p *Provider, body string, stream bool, key string) (*provider.Response, error) {
	return p.Send(context.Background(), &provider.Request{Endpoint: provider.Chat, Body: []byte(body), Stream: stream,
		Model: "gemini-2.5-flash", APIKey: key, Header: http.Header{"Authorization": {"Bearer client"}}})
}

func TestUnary(t *testing.T) {
	u, p := newUpstream(t, jsonAnswer(200, `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello."}]},"finishReason":"STOP","index":0}],
		"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":2,"totalTokenCount":10,"cachedContentTokenCount":4},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`))
	resp, err := send(p, chatReq, false, "")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	var c struct {
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens        int64 `json:"prompt_tokens"`
			CompletionTokens    int64 `json:"completion_tokens"`
			PromptTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	}
	if err := json.Unmarshal(b, &c); err != nil || c.Choices[0].Message.Content != "Hello." || c.Choices[0].FinishReason != "stop" ||
		c.Usage.PromptTokens != 8 || c.Usage.CompletionTokens != 2 || c.Usage.PromptTokensDetails.CachedTokens != 4 {
		t.Errorf("answer %s", b)
	}
	r := u.reqs[0]
	if r.URL.Path != "/v1beta/models/gemini-2.5-flash:generateContent" || r.Header.Get("x-goog-api-key") != "g1" || r.Header.Get("Authorization") != "" {
		t.Errorf("upstream request %s %v", r.URL, r.Header)
	}
	if !strings.Contains(u.bodies[0], `"systemInstruction":{"parts":[{"text":"Be brief."}]}`) || !strings.Contains(u.bodies[0], `"maxOutputTokens":50`) {
		t.Errorf("upstream body %s", u.bodies[0])
	}
}

func TestKeyRotation(t *testing.T) {
	u, p := newUpstream(t, jsonAnswer(200, `{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"STOP"}]}`))
	for _, k := range []string{"", "", "", "mine"} {
		resp, err := send(p, chatReq, false, k)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	var got []string
	for _, r := range u.reqs {
		got = append(got, r.Header.Get("x-goog-api-key"))
	}
	if strings.Join(got, ",") != "g1,g2,g1,mine" {
		t.Errorf("keys %v", got)
	}
}

type chunk struct {
	Choices []struct {
		Index int
		Delta struct {
			Content          *string
			ReasoningContent *string `json:"reasoning_content"`
			ToolCalls        []struct {
				Index    int
				ID       string
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		}
		FinishReason *string `json:"finish_reason"`
	}
	Usage map[string]any
}

func readChunks(t *testing.T, r io.Reader) (out []chunk, done bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("chunk %q: %v", line, err)
		}
		out = append(out, c)
	}
	return out, done
}

func TestStreamParallelFunctionCalls(t *testing.T) {
	u, p := newUpstream(t, sseAnswer(
		`{"candidates":[{"content":{"parts":[{"text":"Let me check.","thought":true}],"role":"model"},"index":0}],"responseId":"s1"}`,
		`{"candidates":[{"content":{"parts":[{"text":"Checking "}],"role":"model"},"index":0}],"responseId":"s1"}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"sig1"},{"functionCall":{"name":"get_weather","args":{"city":"Rome"}}}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":20,"candidatesTokenCount":10,"thoughtsTokenCount":5,"totalTokenCount":35},"responseId":"s1"}`))
	req := `{"model":"gemini-2.5-flash","stream":true,"messages":[{"role":"user","content":"weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`
	resp, err := send(p, req, true, "")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if r := u.reqs[0]; r.URL.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" || r.URL.RawQuery != "alt=sse" {
		t.Errorf("url %s", r.URL)
	}
	chunks, done := readChunks(t, resp.Body)
	if !done {
		t.Error("no [DONE]")
	}
	var text, thought string
	calls := map[int][2]string{}
	var ids []string
	var finish string
	var usage map[string]any
	for _, c := range chunks {
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				text += *ch.Delta.Content
			}
			if ch.Delta.ReasoningContent != nil {
				thought += *ch.Delta.ReasoningContent
			}
			for _, tc := range ch.Delta.ToolCalls {
				calls[tc.Index] = [2]string{tc.Function.Name, calls[tc.Index][1] + tc.Function.Arguments}
				ids = append(ids, tc.ID)
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			usage = c.Usage
		}
	}
	if text != "Checking " || thought != "Let me check." || finish != "tool_calls" {
		t.Errorf("text %q thought %q finish %q", text, thought, finish)
	}
	if calls[0] != [2]string{"get_weather", `{"city":"Paris"}`} || calls[1] != [2]string{"get_weather", `{"city":"Rome"}`} ||
		len(ids) != 2 || ids[0] == ids[1] || !strings.HasSuffix(ids[0], "sig1") {
		t.Errorf("calls %v ids %v", calls, ids)
	}
	if usage["prompt_tokens"].(float64) != 20 || usage["completion_tokens"].(float64) != 15 {
		t.Errorf("usage %v", usage)
	}
}

func TestSafetyBlock(t *testing.T) {
	blocked := `{"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH"}]},"usageMetadata":{"promptTokenCount":5,"totalTokenCount":5}}`
	for _, stream := range []bool{false, true} {
		h := jsonAnswer(200, blocked)
		if stream {
			h = sseAnswer(blocked)
		}
		_, p := newUpstream(t, h)
		_, err := send(p, chatReq, stream, "")
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Status != 400 || !strings.Contains(string(pe.Body), `"code":"content_filter"`) ||
			!strings.Contains(string(pe.Body), "SAFETY") {
			t.Errorf("stream=%v: %#v", stream, err)
		}
	}
}

func TestErrorsMapped(t *testing.T) {
	cases := []struct {
		status int
		body   string
		typ    string
	}{
		{400, `{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}`, "invalid_request_error"},
		{403, `{"error":{"code":403,"message":"denied","status":"PERMISSION_DENIED"}}`, "permission_error"},
		{429, `{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}`, "rate_limit_error"},
		{500, `{"error":{"code":500,"message":"Internal error","status":"INTERNAL"}}`, "server_error"},
		{503, `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`, "overloaded_error"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			_, p := newUpstream(t, jsonAnswer(c.status, c.body))
			_, err := send(p, chatReq, false, "")
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Status != c.status {
				t.Fatalf("err %#v", err)
			}
			var e struct {
				Error struct{ Message, Type string }
			}
			if json.Unmarshal(pe.Body, &e) != nil || e.Error.Type != c.typ || e.Error.Message == "" {
				t.Errorf("body %s", pe.Body)
			}
		})
	}
}

func TestBadResponses(t *testing.T) {
	for name, c := range map[string]struct {
		h      http.HandlerFunc
		stream bool
	}{
		"html":         {func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html>hi</html>") }, false},
		"stream html":  {func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html>hi</html>") }, true},
		"stream cut":   {sseAnswer(`{"candidates":[{"content":{"parts":[{"text":"x"}]},"index":0}]}`), false},
		"stream empty": {sseAnswer(), true},
	} {
		t.Run(name, func(t *testing.T) {
			_, p := newUpstream(t, c.h)
			resp, err := send(p, chatReq, c.stream, "")
			if err == nil && resp.Stream {
				_, err = io.ReadAll(resp.Body)
			}
			if name == "stream cut" {
				// A unary request answered with an event stream is not JSON.
				if err == nil {
					t.Error("no error")
				}
				return
			}
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Kind != provider.KindBadResponse {
				t.Errorf("err %#v", err)
			}
		})
	}
}

func TestStreamCutMidway(t *testing.T) {
	_, p := newUpstream(t, sseAnswer(`{"candidates":[{"content":{"parts":[{"text":"part"}]},"index":0}]}`))
	resp, err := send(p, chatReq, true, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err == nil || !strings.Contains(string(b), `"content":"part"`) || strings.Contains(string(b), "[DONE]") {
		t.Errorf("cut stream: %q, %v", b, err)
	}
}

func TestUnsupportedEndpoints(t *testing.T) {
	_, p := newUpstream(t, jsonAnswer(200, `{}`))
	for _, e := range []provider.Endpoint{provider.Completions, provider.Embeddings, provider.Responses, provider.Messages} {
		_, err := p.Send(context.Background(), &provider.Request{Endpoint: e, Body: []byte(`{}`)})
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Status != 400 || !strings.Contains(string(pe.Body), string(e)) {
			t.Errorf("%s: %#v", e, err)
		}
	}
}
