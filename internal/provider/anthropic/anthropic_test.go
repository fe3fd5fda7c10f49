package anthropic

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
	"time"

	"switchboard/internal/config"
	"switchboard/internal/provider"
)

const chatReq = `{"model":"claude-x","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]}`

type upstream struct {
	mu      sync.Mutex
	reqs    []*http.Request
	bodies  []string
	handler http.HandlerFunc
}

func newUpstream(t *testing.T, h http.HandlerFunc) (*upstream, *Provider) {
	u := &upstream{handler: h}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, r)
		u.bodies = append(u.bodies, string(b))
		u.mu.Unlock()
		u.handler(w, r)
	}))
	t.Cleanup(srv.Close)
	p := New(&config.Provider{Name: "anth", Type: config.TypeAnthropic, BaseURL: srv.URL + "/v1",
		APIKeys: []string{"k1", "k2"}, Headers: map[string]string{"X-Extra": "1"}}, srv.Client())
	return u, p
}

func jsonAnswer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("anthropic-ratelimit-requests-remaining", "99")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func sseAnswer(events string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		io.WriteString(w, events)
	}
}

func ev(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

func TestChatUnary(t *testing.T) {
	u, p := newUpstream(t, jsonAnswer(200, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x",
		"content":[{"type":"text","text":"Hello."}],"stop_reason":"end_turn","stop_sequence":null,
		"usage":{"input_tokens":10,"cache_read_input_tokens":5,"cache_creation_input_tokens":2,"output_tokens":3}}`))
	h := http.Header{"Authorization": {"Bearer client-key"}, "X-Request-Id": {"r1"}}
	resp, err := p.Send(context.Background(), &provider.Request{Endpoint: provider.Chat, Body: []byte(chatReq), Model: "claude-x", Header: h})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	var c struct {
		Object  string
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage map[string]any
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err, string(body))
	}
	if c.Object != "chat.completion" || c.Choices[0].Message.Content != "Hello." || c.Choices[0].FinishReason != "stop" {
		t.Errorf("answer %s", body)
	}
	if c.Usage["prompt_tokens"].(float64) != 17 || c.Usage["cache_creation_input_tokens"].(float64) != 2 {
		t.Errorf("usage %v", c.Usage)
	}
	if resp.Header.Get("anthropic-ratelimit-requests-remaining") != "99" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("header %v", resp.Header)
	}
	r := u.reqs[0]
	if r.URL.Path != "/v1/messages" || r.Header.Get("x-api-key") != "k1" || r.Header.Get("anthropic-version") != "2023-06-01" ||
		r.Header.Get("Authorization") != "" || r.Header.Get("X-Extra") != "1" || r.Header.Get("X-Request-Id") != "r1" {
		t.Errorf("upstream request %s %v", r.URL.Path, r.Header)
	}
	if !strings.Contains(u.bodies[0], `"max_tokens":8192`) || !strings.Contains(u.bodies[0], `"system":[{"type":"text","text":"Be brief."}]`) {
		t.Errorf("upstream body %s", u.bodies[0])
	}
}

func TestKeyRotation(t *testing.T) {
	u, p := newUpstream(t, jsonAnswer(200, `{"id":"m","type":"message","content":[],"usage":{}}`))
	for _, k := range []string{"", "", "", "chosen"} {
		resp, err := p.Send(context.Background(), &provider.Request{Endpoint: provider.Chat, Body: []byte(chatReq), APIKey: k})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	var got []string
	for _, r := range u.reqs {
		got = append(got, r.Header.Get("x-api-key"))
	}
	if strings.Join(got, ",") != "k1,k2,k1,chosen" {
		t.Errorf("keys %v", got)
	}
}

func TestVersionHeaderFromConfig(t *testing.T) {
	u, p := newUpstream(t, jsonAnswer(200, `{"id":"m","type":"message","content":[],"usage":{}}`))
	p.Header.Set("anthropic-version", "2099-01-01")
	resp, err := p.Send(context.Background(), &provider.Request{Endpoint: provider.Chat, Body: []byte(chatReq)})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v := u.reqs[0].Header.Get("anthropic-version"); v != "2099-01-01" {
		t.Errorf("anthropic-version %q", v)
	}
}

func TestChatStreamToolCalls(t *testing.T) {
	events := ev("message_start", `{"type":"message_start","message":{"id":"msg_s","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":1}}}`) +
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_a","name":"get_weather","input":{}}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":" \"Paris\"}"}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_b","name":"get_weather","input":{}}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Rome\"}"}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":1}`) +
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}`) +
		ev("message_stop", `{"type":"message_stop"}`)
	u, p := newUpstream(t, sseAnswer(events))
	req := `{"model":"claude-x","stream":true,"messages":[{"role":"user","content":"weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`
	resp, err := p.Send(context.Background(), &provider.Request{Endpoint: provider.Chat, Body: []byte(req), Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !resp.Stream || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("response %+v", resp)
	}
	if u.reqs[0].Header.Get("Accept") != "text/event-stream" || !strings.Contains(u.bodies[0], `"stream":true`) {
		t.Errorf("upstream request %v %s", u.reqs[0].Header, u.bodies[0])
	}
	chunks, done := readChunks(t, resp.Body)
	if !done {
		t.Error("no [DONE]")
	}
	args := map[int]string{}
	ids := map[int]string{}
	var finish string
	var usage map[string]any
	for _, c := range chunks {
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				args[tc.Index] += tc.Function.Arguments
				if tc.ID != "" {
					ids[tc.Index] = tc.ID
				}
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			usage = c.Usage
		}
	}
	if args[0] != `{"city": "Paris"}` || args[1] != `{"city": "Rome"}` || ids[0] != "toolu_a" || ids[1] != "toolu_b" {
		t.Errorf("tool calls %v %v", ids, args)
	}
	if finish != "tool_calls" || usage["prompt_tokens"].(float64) != 20 || usage["completion_tokens"].(float64) != 40 {
		t.Errorf("finish %q usage %v", finish, usage)
	}
}

type chunk struct {
	Choices []struct {
		Delta struct {
			Content   *string
			ToolCalls []struct {
				Index    int
				ID       string
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		}
		FinishReason *string `json:"finish_reason"`
	}
	Usage map[string]any
	Error map[string]any
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

// TestStreamIsIncremental proves events are translated as they arrive:
// the upstream holds the rest of its stream until the client has read the
// first text.
func TestStreamIsIncremental(t *testing.T) {
	release := make(chan struct{})
	_, p := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ev("message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"x","usage":{"input_tokens":1,"output_tokens":1}}}`)+
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)+
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"first"}}`))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(5 * time.Second):
			return
		}
		io.WriteString(w, ev("content_block_stop", `{"type":"content_block_stop","index":0}`)+
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`)+
			ev("message_stop", `{"type":"message_stop"}`))
	})
	resp, err := p.Send(context.Background(), &provider.Request{Endpoint: provider.Chat, Body: []byte(chatReq), Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	deadline := time.Now().Add(3 * time.Second)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content":"first"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("first text not delivered before the upstream finished")
		}
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("rest %q err %v", rest, err)
	}
}

func TestStreamCloseAndCancel(t *testing.T) {
	_, p := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ev("message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"x","usage":{}}}`)+
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)+
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // an upstream that never ends
	})
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := p.Send(ctx, &provider.Request{Endpoint: provider.Chat, Body: []byte(chatReq), Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("canceled stream ended cleanly")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("read did not stop when the context ended")
	}
	resp.Body.Close()
}

func TestErrorsMapped(t *testing.T) {
	cases := []struct {
		status int
		body   string
		typ    string
	}{
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: bad"}}`, "invalid_request_error"},
		{401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, "authentication_error"},
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, "rate_limit_error"},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "overloaded_error"},
		{502, `<html>bad gateway</html>`, "server_error"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			_, p := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "7")
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			})
			for _, stream := range []bool{false, true} {
				_, err := p.Send(context.Background(), &provider.Request{Endpoint: provider.Chat, Body: []byte(chatReq), Stream: stream})
				var pe *provider.Error
				if !errors.As(err, &pe) || pe.Kind != provider.KindHTTP || pe.Status != c.status || pe.Header.Get("Retry-After") != "7" {
					t.Fatalf("err %#v", err)
				}
				var e struct {
					Error struct{ Message, Type string }
				}
				if json.Unmarshal(pe.Body, &e) != nil || e.Error.Type != c.typ || e.Error.Message == "" {
					t.Errorf("body %s", pe.Body)
				}
			}
		})
	}
}

func TestBadResponses(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"html": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html>hi</html>")
		},
		"not message": jsonAnswer(200, `{"hello":1}`),
	} {
		t.Run(name, func(t *testing.T) {
			_, p := newUpstream(t, h)
			_, err := p.Send(context.Background(), &provider.Request{Endpoint: provider.Chat, Body: []byte(chatReq)})
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Kind != provider.KindBadResponse {
				t.Errorf("err %#v", err)
			}
		})
	}
	t.Run("stream html", func(t *testing.T) {
		_, p := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html>hi</html>") })
		_, err := p.Send(context.Background(), &provider.Request{Endpoint: provider.Chat, Body: []byte(chatReq), Stream: true})
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Kind != provider.KindBadResponse {
			t.Errorf("err %#v", err)
		}
	})
}

func TestStreamOpeningWithErrorFailsAttempt(t *testing.T) {
	_, p := newUpstream(t, sseAnswer(ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)))
	_, err := p.Send(context.Background(), &provider.Request{Endpoint: provider.Chat, Body: []byte(chatReq), Stream: true})
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 529 || !pe.Retryable() || !strings.Contains(string(pe.Body), "Overloaded") {
		t.Errorf("err %#v", err)
	}
}

func TestRefusalNeverReachesUpstream(t *testing.T) {
	u, p := newUpstream(t, jsonAnswer(200, `{}`))
	_, err := p.Send(context.Background(), &provider.Request{Endpoint: provider.Chat,
		Body: []byte(`{"model":"x","messages":[{"role":"user","content":"hi"}],"temperature":1.7}`)})
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 400 || !strings.Contains(string(pe.Body), `"param":"temperature"`) {
		t.Errorf("err %#v", err)
	}
	if len(u.reqs) != 0 {
		t.Error("refused request was sent")
	}
}

func TestUnsupportedEndpoints(t *testing.T) {
	_, p := newUpstream(t, jsonAnswer(200, `{}`))
	for _, e := range []provider.Endpoint{provider.Completions, provider.Embeddings, provider.Responses} {
		_, err := p.Send(context.Background(), &provider.Request{Endpoint: e, Body: []byte(`{}`)})
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Status != 400 || !strings.Contains(string(pe.Body), string(e)) {
			t.Errorf("%s: %#v", e, err)
		}
	}
}

func TestMessagesPassthrough(t *testing.T) {
	native := `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":1024}}`
	answer := `{"id":"msg_p","type":"message","role":"assistant","content":[{"type":"text","text":"yo"}],"model":"claude-x","stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`
	u, p := newUpstream(t, jsonAnswer(200, answer))
	resp, err := p.Send(context.Background(), &provider.Request{Endpoint: provider.Messages, Body: []byte(native),
		Header: http.Header{"Anthropic-Beta": {"b1"}, "Anthropic-Version": {"2023-06-01"}}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != answer || u.bodies[0] != native || u.reqs[0].Header.Get("anthropic-beta") != "b1" {
		t.Errorf("passthrough changed bytes: sent %s got %s", u.bodies[0], b)
	}

	stream := ev("message_start", `{"type":"message_start"}`) + ev("message_stop", `{"type":"message_stop"}`)
	u.handler = sseAnswer(stream)
	resp, err = p.Send(context.Background(), &provider.Request{Endpoint: provider.Messages, Body: []byte(native), Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	if !resp.Stream || string(b) != stream {
		t.Errorf("stream passthrough %q", b)
	}

	errBody := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	u.handler = jsonAnswer(529, errBody)
	_, err = p.Send(context.Background(), &provider.Request{Endpoint: provider.Messages, Body: []byte(native)})
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 529 || string(pe.Body) != errBody {
		t.Errorf("passthrough error %#v", err)
	}
}

func TestStreamErrorAfterMessageStartFailsAttempt(t *testing.T) {
	_, p := newUpstream(t, sseAnswer(ev("message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"x","usage":{"input_tokens":1,"output_tokens":1}}}`)+
		ev("ping", `{"type":"ping"}`)+
		ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)))
	_, err := p.Send(context.Background(), &provider.Request{Endpoint: provider.Chat, Body: []byte(chatReq), Stream: true})
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 529 {
		t.Errorf("err %#v", err)
	}
}

// TestNativeBodyIsWhatIsSent: admission prices the Messages body the
// provider sends (NativeBody), and Send posts exactly that body, translated
// once.
func TestNativeBodyIsWhatIsSent(t *testing.T) {
	u, p := newUpstream(t, jsonAnswer(200, `{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`))
	req := &provider.Request{Endpoint: provider.Chat, Body: []byte(`{"model":"claude-x","messages":[{"role":"user","content":"hi"}],"max_tokens":9000,"reasoning_effort":"high"}`), Model: "claude-x"}
	ep, body, ok := p.NativeBody(req)
	if !ok || ep != "messages" || !strings.Contains(string(body), `"budget_tokens":4096`) || req.Prepared == nil {
		t.Fatalf("NativeBody = %q %s %v", ep, body, ok)
	}
	resp, err := p.Send(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(u.bodies) != 1 || u.bodies[0] != string(body) {
		t.Fatalf("sent %q, priced %q", u.bodies, body)
	}
	if _, _, ok := p.NativeBody(&provider.Request{Endpoint: provider.Messages, Body: []byte(`{}`)}); ok {
		t.Fatal("a native Messages request needs no translation")
	}
}
