package mock

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/provider"
)

func send(t testing.TB, p *Provider, ep provider.Endpoint, body string, stream bool) (*provider.Response, error) {
	t.Helper()
	return p.Send(context.Background(), &provider.Request{Endpoint: ep, Body: []byte(body), Stream: stream, Model: "fallback-model"})
}

func mustSend(t testing.TB, p *Provider, ep provider.Endpoint, body string, stream bool) *provider.Response {
	t.Helper()
	r, err := send(t, p, ep, body, stream)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	return r
}

func readAll(t testing.TB, r *provider.Response) []byte {
	t.Helper()
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return b
}

type sseEvent struct {
	Event string
	Data  string
}

// parseSSE splits a stream into events; each must be "event:"/"data:" lines
// ended by a blank line.
func parseSSE(t testing.TB, b []byte) []sseEvent {
	t.Helper()
	s := string(b)
	if s != "" && !strings.HasSuffix(s, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", s)
	}
	var evs []sseEvent
	for _, block := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		if block == "" {
			continue
		}
		var ev sseEvent
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data = strings.TrimPrefix(line, "data: ")
			default:
				t.Fatalf("bad SSE line %q", line)
			}
		}
		evs = append(evs, ev)
	}
	return evs
}

func decode(t testing.TB, data string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(data))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
}

type usageJSON struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type chatJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usageJSON `json:"usage"`
}

type respJSON struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Status            string `json:"status"`
	Model             string `json:"model"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Output []struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Status  string `json:"status"`
		Content []struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			Annotations []any  `json:"annotations"`
		} `json:"content"`
	} `json:"output"`
	Usage *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

type embJSON struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

func wantText(name string, n int) string {
	s := "Hello from " + name + "!"
	for i := 2; i <= n; i++ {
		s += " token " + strconv.Itoa(i)
	}
	return s
}

const (
	chatBody = `{"model":"m1","messages":[{"role":"user","content":"hi there, how are you today?"}]}`
	compBody = `{"model":"m1","prompt":"Say hello to the nice people"}`
	respBody = `{"model":"m1","input":"Say hello to the nice people"}`
)

func TestUnaryShapes(t *testing.T) {
	p := New("alpha", config.Mock{Tokens: 4})
	tests := []struct {
		name  string
		ep    provider.Endpoint
		body  string
		check func(t *testing.T, b []byte)
	}{
		{"chat", provider.Chat, chatBody, func(t *testing.T, b []byte) {
			var c chatJSON
			decode(t, string(b), &c)
			if c.Object != "chat.completion" || !strings.HasPrefix(c.ID, "chatcmpl-mock-") || c.Model != "m1" || c.Created == 0 {
				t.Fatalf("header fields: %+v", c)
			}
			if len(c.Choices) != 1 || c.Choices[0].Message.Role != "assistant" || c.Choices[0].Message.Content != wantText("alpha", 4) {
				t.Fatalf("choices: %s", b)
			}
			if c.Choices[0].FinishReason == nil || *c.Choices[0].FinishReason != "stop" {
				t.Fatalf("finish_reason: %s", b)
			}
			want := usageJSON{PromptTokens: len(`[{"role":"user","content":"hi there, how are you today?"}]`) / 4, CompletionTokens: 4}
			want.TotalTokens = want.PromptTokens + 4
			if c.Usage == nil || *c.Usage != want {
				t.Fatalf("usage %+v, want %+v", c.Usage, want)
			}
		}},
		{"completions", provider.Completions, compBody, func(t *testing.T, b []byte) {
			var c chatJSON
			decode(t, string(b), &c)
			if c.Object != "text_completion" || !strings.HasPrefix(c.ID, "cmpl-mock-") || c.Model != "m1" {
				t.Fatalf("header fields: %s", b)
			}
			if len(c.Choices) != 1 || c.Choices[0].Text != wantText("alpha", 4) || *c.Choices[0].FinishReason != "stop" {
				t.Fatalf("choices: %s", b)
			}
			if c.Usage == nil || c.Usage.CompletionTokens != 4 || c.Usage.PromptTokens != len(`"Say hello to the nice people"`)/4 {
				t.Fatalf("usage: %s", b)
			}
		}},
		{"responses", provider.Responses, respBody, func(t *testing.T, b []byte) {
			var r respJSON
			decode(t, string(b), &r)
			if r.Object != "response" || r.Status != "completed" || r.Model != "m1" || !strings.HasPrefix(r.ID, "resp_") {
				t.Fatalf("header fields: %s", b)
			}
			if len(r.Output) != 1 || r.Output[0].Type != "message" || r.Output[0].Role != "assistant" ||
				len(r.Output[0].Content) != 1 || r.Output[0].Content[0].Type != "output_text" ||
				r.Output[0].Content[0].Text != wantText("alpha", 4) || r.Output[0].Content[0].Annotations == nil {
				t.Fatalf("output: %s", b)
			}
			if r.Usage == nil || r.Usage.OutputTokens != 4 || r.Usage.TotalTokens != r.Usage.InputTokens+4 || r.Usage.InputTokens < 1 {
				t.Fatalf("usage: %s", b)
			}
		}},
		{"embeddings", provider.Embeddings, `{"model":"e1","input":"hello"}`, func(t *testing.T, b []byte) {
			var e embJSON
			decode(t, string(b), &e)
			if e.Object != "list" || e.Model != "e1" || len(e.Data) != 1 || e.Data[0].Object != "embedding" {
				t.Fatalf("shape: %s", b)
			}
			var v []float64
			decode(t, string(e.Data[0].Embedding), &v)
			if len(v) != 8 {
				t.Fatalf("dims %d", len(v))
			}
			if e.Usage.PromptTokens != 1 || e.Usage.TotalTokens != 1 {
				t.Fatalf("usage: %s", b)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustSend(t, p, tt.ep, tt.body, false)
			if r.Status != 200 || r.Stream || r.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("response %d stream=%v ctype=%q", r.Status, r.Stream, r.Header.Get("Content-Type"))
			}
			tt.check(t, readAll(t, r))
		})
	}
}

func TestModelFallback(t *testing.T) {
	p := New("a", config.Mock{Tokens: 1})
	var c chatJSON
	decode(t, string(readAll(t, mustSend(t, p, provider.Chat, `{"messages":[]}`, false))), &c)
	if c.Model != "fallback-model" {
		t.Fatalf("model %q", c.Model)
	}
}

func TestMaxTokens(t *testing.T) {
	p := New("a", config.Mock{Tokens: 10})
	tests := []struct {
		name, body string
		ep         provider.Endpoint
		tokens     int
		finish     string
	}{
		{"max_tokens", `{"max_tokens":3,"messages":[]}`, provider.Chat, 3, "length"},
		{"max_completion_tokens", `{"max_completion_tokens":2,"messages":[]}`, provider.Chat, 2, "length"},
		{"larger", `{"max_tokens":50,"messages":[]}`, provider.Chat, 10, "stop"},
		{"completions", `{"max_tokens":4,"prompt":"x"}`, provider.Completions, 4, "length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c chatJSON
			decode(t, string(readAll(t, mustSend(t, p, tt.ep, tt.body, false))), &c)
			if *c.Choices[0].FinishReason != tt.finish || c.Usage.CompletionTokens != tt.tokens {
				t.Fatalf("finish %q tokens %d", *c.Choices[0].FinishReason, c.Usage.CompletionTokens)
			}
		})
	}
	t.Run("responses", func(t *testing.T) {
		var r respJSON
		decode(t, string(readAll(t, mustSend(t, p, provider.Responses, `{"max_output_tokens":5,"input":"x"}`, false))), &r)
		if r.Status != "incomplete" || r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" || r.Usage.OutputTokens != 5 {
			t.Fatalf("%+v", r)
		}
	})
}

func TestChatStream(t *testing.T) {
	for _, usage := range []bool{false, true} {
		t.Run("include_usage="+strconv.FormatBool(usage), func(t *testing.T) {
			p := New("beta", config.Mock{Tokens: 5})
			body := `{"model":"m1","stream":true,"messages":[{"role":"user","content":"hi"}]`
			if usage {
				body += `,"stream_options":{"include_usage":true}`
			}
			r := mustSend(t, p, provider.Chat, body+"}", true)
			if !r.Stream || r.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("stream=%v ctype=%q", r.Stream, r.Header.Get("Content-Type"))
			}
			evs := parseSSE(t, readAll(t, r))
			want := 1 + 5 + 1 + 1 // role, tokens, finish, [DONE]
			if usage {
				want++
			}
			if len(evs) != want {
				t.Fatalf("%d events, want %d: %+v", len(evs), want, evs)
			}
			if evs[len(evs)-1].Data != "[DONE]" {
				t.Fatalf("last event %q", evs[len(evs)-1].Data)
			}
			var chunks []chatJSON
			for _, ev := range evs[:len(evs)-1] {
				var c chatJSON
				decode(t, ev.Data, &c)
				if c.Object != "chat.completion.chunk" || c.Model != "m1" || c.ID != chunksID(chunks, c.ID) {
					t.Fatalf("chunk header: %s", ev.Data)
				}
				chunks = append(chunks, c)
			}
			first := chunks[0].Choices[0]
			if *first.Delta.Role != "assistant" || *first.Delta.Content != "" || first.FinishReason != nil {
				t.Fatalf("first chunk: %s", evs[0].Data)
			}
			var text string
			for i, c := range chunks[1:6] {
				d := c.Choices[0].Delta
				if d.Content == nil || d.Role != nil || c.Choices[0].FinishReason != nil {
					t.Fatalf("token chunk %d: %s", i, evs[i+1].Data)
				}
				if want := (&job{p: p}).token(i + 1); *d.Content != want {
					t.Fatalf("token %d = %q, want %q", i+1, *d.Content, want)
				}
				text += *d.Content
			}
			if text != wantText("beta", 5) {
				t.Fatalf("text %q", text)
			}
			fin := chunks[6].Choices[0]
			if fin.FinishReason == nil || *fin.FinishReason != "stop" || fin.Delta.Content != nil || fin.Delta.Role != nil {
				t.Fatalf("finish chunk: %s", evs[6].Data)
			}
			if usage {
				u := chunks[7]
				if len(u.Choices) != 0 || u.Usage == nil || u.Usage.CompletionTokens != 5 || u.Usage.TotalTokens != u.Usage.PromptTokens+5 {
					t.Fatalf("usage chunk: %s", evs[7].Data)
				}
				if !strings.Contains(evs[1].Data, `"usage":null`) {
					t.Fatalf("token chunk lacks usage:null: %s", evs[1].Data)
				}
			} else if strings.Contains(evs[1].Data, `"usage"`) {
				t.Fatalf("usage present without include_usage: %s", evs[1].Data)
			}
		})
	}
}

// chunksID returns the id every chunk of a stream must share.
func chunksID(prev []chatJSON, cur string) string {
	if len(prev) == 0 {
		return cur
	}
	return prev[0].ID
}

func TestCompletionsStream(t *testing.T) {
	p := New("c", config.Mock{Tokens: 3})
	evs := parseSSE(t, readAll(t, mustSend(t, p, provider.Completions, `{"model":"m","prompt":"x","max_tokens":2,"stream_options":{"include_usage":true}}`, true)))
	// 2 tokens, finish, usage, [DONE]
	if len(evs) != 5 || evs[4].Data != "[DONE]" {
		t.Fatalf("events: %+v", evs)
	}
	for i, ev := range evs[:4] {
		var c chatJSON
		decode(t, ev.Data, &c)
		if c.Object != "text_completion" {
			t.Fatalf("object %q", c.Object)
		}
		switch {
		case i < 2:
			if c.Choices[0].Text != (&job{p: p}).token(i+1) || c.Choices[0].FinishReason != nil {
				t.Fatalf("token %d: %s", i, ev.Data)
			}
		case i == 2:
			if *c.Choices[0].FinishReason != "length" {
				t.Fatalf("finish: %s", ev.Data)
			}
		default:
			if len(c.Choices) != 0 || c.Usage.CompletionTokens != 2 {
				t.Fatalf("usage: %s", ev.Data)
			}
		}
	}
}

func TestResponsesStream(t *testing.T) {
	tests := []struct {
		name, body, last, status string
		tokens                   int
	}{
		{"completed", `{"model":"m1","input":"hi","stream":true}`, "response.completed", "completed", 3},
		{"incomplete", `{"model":"m1","input":"hi","stream":true,"max_output_tokens":2}`, "response.incomplete", "incomplete", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New("gamma", config.Mock{Tokens: 3})
			evs := parseSSE(t, readAll(t, mustSend(t, p, provider.Responses, tt.body, true)))
			want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
			for range tt.tokens {
				want = append(want, "response.output_text.delta")
			}
			want = append(want, "response.output_text.done", "response.content_part.done", "response.output_item.done", tt.last)
			if len(evs) != len(want) {
				t.Fatalf("%d events, want %d: %+v", len(evs), len(want), evs)
			}
			var text string
			for i, ev := range evs {
				var e struct {
					Type           string    `json:"type"`
					SequenceNumber *int      `json:"sequence_number"`
					Delta          string    `json:"delta"`
					Text           string    `json:"text"`
					ItemID         string    `json:"item_id"`
					Response       *respJSON `json:"response"`
				}
				decode(t, ev.Data, &e)
				if ev.Event != want[i] || e.Type != want[i] {
					t.Fatalf("event %d: event %q type %q, want %q", i, ev.Event, e.Type, want[i])
				}
				if e.SequenceNumber == nil || *e.SequenceNumber != i {
					t.Fatalf("event %d: sequence_number %v", i, e.SequenceNumber)
				}
				switch e.Type {
				case "response.created", "response.in_progress":
					if e.Response == nil || e.Response.Status != "in_progress" || e.Response.Object != "response" {
						t.Fatalf("%s: %s", e.Type, ev.Data)
					}
				case "response.output_text.delta":
					text += e.Delta
					if e.ItemID == "" {
						t.Fatalf("delta without item_id: %s", ev.Data)
					}
				case "response.output_text.done":
					if e.Text != wantText("gamma", tt.tokens) {
						t.Fatalf("done text %q", e.Text)
					}
				case tt.last:
					r := e.Response
					if r == nil || r.Status != tt.status || r.Usage == nil || r.Usage.OutputTokens != tt.tokens ||
						len(r.Output) != 1 || r.Output[0].Content[0].Text != wantText("gamma", tt.tokens) {
						t.Fatalf("%s: %s", e.Type, ev.Data)
					}
				}
			}
			if text != wantText("gamma", tt.tokens) {
				t.Fatalf("text %q", text)
			}
		})
	}
}

func TestEmbeddings(t *testing.T) {
	p := New("e", config.Mock{})
	get := func(body string) embJSON {
		t.Helper()
		var e embJSON
		decode(t, string(readAll(t, mustSend(t, p, provider.Embeddings, body, false))), &e)
		return e
	}
	vec := func(raw json.RawMessage) []float32 {
		t.Helper()
		var v []float32
		decode(t, string(raw), &v)
		return v
	}
	t.Run("array", func(t *testing.T) {
		e := get(`{"model":"e","input":["a","b","a"],"dimensions":16}`)
		if len(e.Data) != 3 {
			t.Fatalf("%d vectors", len(e.Data))
		}
		for i, d := range e.Data {
			if d.Index != i || len(vec(d.Embedding)) != 16 {
				t.Fatalf("vector %d: index %d", i, d.Index)
			}
		}
		if string(e.Data[0].Embedding) != string(e.Data[2].Embedding) || string(e.Data[0].Embedding) == string(e.Data[1].Embedding) {
			t.Fatal("vectors not a function of the input text")
		}
		var norm float64
		for _, x := range vec(e.Data[1].Embedding) {
			norm += float64(x) * float64(x)
		}
		if math.Abs(norm-1) > 1e-4 {
			t.Fatalf("norm %v", norm)
		}
	})
	t.Run("deterministic", func(t *testing.T) {
		a, b := get(`{"input":"same"}`), get(`{"model":"other","input":"same"}`)
		if string(a.Data[0].Embedding) != string(b.Data[0].Embedding) {
			t.Fatal("same text embedded differently")
		}
	})
	t.Run("token arrays", func(t *testing.T) {
		if e := get(`{"input":[1,2,3]}`); len(e.Data) != 1 {
			t.Fatalf("one token array gave %d vectors", len(e.Data))
		}
		if e := get(`{"input":[[1,2],[3]]}`); len(e.Data) != 2 {
			t.Fatalf("two token arrays gave %d vectors", len(e.Data))
		}
	})
	t.Run("base64", func(t *testing.T) {
		f := get(`{"input":"x"}`)
		e := get(`{"input":"x","encoding_format":"base64"}`)
		var s string
		decode(t, string(e.Data[0].Embedding), &s)
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(raw) != 32 {
			t.Fatalf("base64 %q: %v", s, err)
		}
		want := vec(f.Data[0].Embedding)
		for i := range want {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != want[i] {
				t.Fatalf("dim %d: %v != %v", i, got, want[i])
			}
		}
	})
	t.Run("stream ignored", func(t *testing.T) {
		r := mustSend(t, p, provider.Embeddings, `{"input":"x"}`, true)
		if r.Stream {
			t.Fatal("embeddings streamed")
		}
		readAll(t, r)
	})
	t.Run("missing input", func(t *testing.T) {
		_, err := send(t, p, provider.Embeddings, `{"model":"e"}`, false)
		if pe := asError(t, err); pe.Status != 400 {
			t.Fatalf("status %d", pe.Status)
		}
	})
}

func asError(t testing.TB, err error) *provider.Error {
	t.Helper()
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not *provider.Error", err, err)
	}
	return pe
}

func TestBadRequests(t *testing.T) {
	p := New("a", config.Mock{})
	_, err := send(t, p, provider.Chat, `{not json`, false)
	if pe := asError(t, err); pe.Kind != provider.KindHTTP || pe.Status != 400 || !json.Valid(pe.Body) {
		t.Fatalf("invalid JSON: %+v", pe)
	}
	_, err = send(t, p, "images/generations", `{}`, false)
	if pe := asError(t, err); pe.Status != 404 {
		t.Fatalf("unknown endpoint: %+v", pe)
	}
}

func TestConfigFaults(t *testing.T) {
	tests := []struct {
		name       string
		opts       config.Mock
		fails      []bool // outcome of consecutive calls
		status     int
		retryAfter string
	}{
		{"fail_first", config.Mock{FailFirst: 2}, []bool{true, true, false, false}, 500, ""},
		{"fail_rate=1", config.Mock{FailRate: 1, FailStatus: 503, FailHeaders: map[string]string{"retry-after": "7"}}, []bool{true, true, true}, 503, "7"},
		{"fail_rate=0", config.Mock{}, []bool{false, false}, 0, ""},
		{"fail_first then rate", config.Mock{FailFirst: 1, FailStatus: 429}, []bool{true, false}, 429, ""},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(tt.name+"/stream="+strconv.FormatBool(stream), func(t *testing.T) {
				p := New("f", tt.opts)
				for i, fail := range tt.fails {
					r, err := send(t, p, provider.Chat, chatBody, stream)
					if !fail {
						if err != nil {
							t.Fatalf("call %d: %v", i, err)
						}
						readAll(t, r)
						continue
					}
					pe := asError(t, err)
					if r != nil || pe.Kind != provider.KindHTTP || pe.Status != tt.status {
						t.Fatalf("call %d: %+v", i, pe)
					}
					if got := pe.Header.Get("Retry-After"); got != tt.retryAfter {
						t.Fatalf("Retry-After %q", got)
					}
					if !bytes.Equal(pe.Body, FailureBody) || pe.Header.Get("Content-Type") != "application/json" {
						t.Fatalf("body %s", pe.Body)
					}
					pe.Header.Set("X-Mutated", "1") // must not leak into the next failure
				}
				if p.Calls() != int64(len(tt.fails)) {
					t.Fatalf("Calls %d", p.Calls())
				}
			})
		}
	}
	p := New("f", config.Mock{FailFirst: 1, FailHeaders: map[string]string{"A": "b"}})
	_, err := send(t, p, provider.Chat, chatBody, false)
	if asError(t, err).Header.Get("X-Mutated") != "" {
		t.Fatal("shared header")
	}
}

func TestHang(t *testing.T) {
	for _, stream := range []bool{false, true} {
		p := New("h", config.Mock{Hang: true})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		start := time.Now()
		r, err := p.Send(ctx, &provider.Request{Endpoint: provider.Chat, Body: []byte(chatBody), Stream: stream})
		if r != nil || time.Since(start) < 15*time.Millisecond {
			t.Fatalf("returned early: %v", err)
		}
		if pe := asError(t, err); pe.Kind != provider.KindCanceled || !errors.Is(err, context.Canceled) {
			t.Fatalf("kind %v: %v", pe.Kind, err)
		}
	}
	p := New("h", config.Mock{Hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := p.Send(ctx, &provider.Request{Endpoint: provider.Chat, Body: []byte(chatBody)})
	if pe := asError(t, err); pe.Kind != provider.KindTimeout {
		t.Fatalf("kind %v", pe.Kind)
	}
}

func TestCut(t *testing.T) {
	tests := []struct {
		name string
		ep   provider.Endpoint
		body string
		pre  int // events before the first content chunk
	}{
		{"chat", provider.Chat, chatBody, 1},
		{"completions", provider.Completions, compBody, 0},
		{"responses", provider.Responses, respBody, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New("x", config.Mock{Tokens: 10, CutAfterChunks: 3})
			r := mustSend(t, p, tt.ep, tt.body, true)
			defer r.Body.Close()
			b, err := io.ReadAll(r.Body)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("err %v", err)
			}
			evs := parseSSE(t, b)
			if len(evs) != tt.pre+3 {
				t.Fatalf("%d events: %s", len(evs), b)
			}
			if bytes.Contains(b, []byte("[DONE]")) || bytes.Contains(b, []byte(`"finish_reason":"`)) || bytes.Contains(b, []byte(".done")) {
				t.Fatalf("cut stream finished: %s", b)
			}
		})
	}
}

func TestCloseStopsProducer(t *testing.T) {
	tests := []struct {
		name string
		opts config.Mock
		read int // bytes to read before closing
	}{
		{"waiting on ttft", config.Mock{TTFTMs: 60000}, 0},
		{"waiting on pacing", config.Mock{TokensPerSecond: 0.01}, 1},
		{"blocked on write", config.Mock{Tokens: 1000}, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustSend(t, New("x", tt.opts), provider.Chat, chatBody, true)
			if tt.read > 0 {
				if _, err := io.ReadFull(r.Body, make([]byte, tt.read)); err != nil {
					t.Fatal(err)
				}
			}
			r.Body.Close()
			waitFinished(t, r)
			if _, err := r.Body.Read(make([]byte, 1)); err == nil {
				t.Fatal("read after Close succeeded")
			}
		})
	}
}

func waitFinished(t *testing.T, r *provider.Response) {
	t.Helper()
	select {
	case <-r.Body.(*streamBody).finished:
	case <-time.After(time.Second):
		t.Fatal("producer goroutine still running")
	}
}

func TestCancelStopsStream(t *testing.T) {
	for _, opts := range []config.Mock{{TTFTMs: 60000}, {Tokens: 1000}} {
		p := New("x", opts)
		ctx, cancel := context.WithCancel(context.Background())
		r, err := p.Send(ctx, &provider.Request{Endpoint: provider.Responses, Body: []byte(respBody), Stream: true})
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		waitFinished(t, r)
		_, err = io.ReadAll(r.Body)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("read err %v", err)
		}
		r.Body.Close()
	}
}

func TestUnaryCancel(t *testing.T) {
	p := New("x", config.Mock{TTFTMs: 60000})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	_, err := p.Send(ctx, &provider.Request{Endpoint: provider.Chat, Body: []byte(chatBody)})
	if pe := asError(t, err); pe.Kind != provider.KindCanceled {
		t.Fatalf("%v", err)
	}
}

func TestPacing(t *testing.T) {
	// 30 ms TTFT then 10 ms per token.
	opts := config.Mock{TTFTMs: 30, TokensPerSecond: 100, Tokens: 3}
	t.Run("unary", func(t *testing.T) {
		start := time.Now()
		readAll(t, mustSend(t, New("x", opts), provider.Chat, chatBody, false))
		if d := time.Since(start); d < 60*time.Millisecond {
			t.Fatalf("answered after %v, want >= 60ms", d)
		}
	})
	t.Run("stream", func(t *testing.T) {
		start := time.Now()
		r := mustSend(t, New("x", opts), provider.Chat, chatBody, true)
		defer r.Body.Close()
		if d := time.Since(start); d >= 30*time.Millisecond {
			t.Fatalf("Send blocked %v on TTFT before returning headers", d)
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 50*time.Millisecond {
			t.Fatalf("stream done after %v, want >= 50ms", d)
		}
		if n := len(parseSSE(t, b)); n != 6 {
			t.Fatalf("%d events", n)
		}
	})
	t.Run("stream first token waits ttft", func(t *testing.T) {
		start := time.Now()
		r := mustSend(t, New("x", config.Mock{TTFTMs: 30}), provider.Chat, chatBody, true)
		defer r.Body.Close()
		if _, err := r.Body.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 30*time.Millisecond {
			t.Fatalf("first byte after %v", d)
		}
	})
}

func TestScript(t *testing.T) {
	p := New("s", config.Mock{Tokens: 4, FailRate: 1, FailStatus: 502})
	p.Script(
		Fault{Status: 429, Header: http.Header{"Retry-After": {"1"}}, Body: []byte(`{"error":{"message":"slow down"}}`)},
		Fault{Transport: true},
		Fault{}, // normal answer despite fail_rate=1
	)
	p.Script(Fault{Garbage: true}, Fault{Status: 200, Body: []byte(`{"custom":true}`)})

	_, err := send(t, p, provider.Chat, chatBody, false)
	pe := asError(t, err)
	if pe.Status != 429 || pe.Header.Get("Retry-After") != "1" || string(pe.Body) != `{"error":{"message":"slow down"}}` {
		t.Fatalf("1: %+v", pe)
	}
	_, err = send(t, p, provider.Chat, chatBody, false)
	if pe := asError(t, err); pe.Kind != provider.KindTransport || !pe.Retryable() {
		t.Fatalf("2: %+v", pe)
	}
	var c chatJSON
	decode(t, string(readAll(t, mustSend(t, p, provider.Chat, chatBody, false))), &c)
	if c.Choices[0].Message.Content != wantText("s", 4) {
		t.Fatalf("3: %+v", c)
	}
	r := mustSend(t, p, provider.Chat, chatBody, false)
	if b := readAll(t, r); json.Valid(b) || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("4: %q %s", r.Header.Get("Content-Type"), b)
	}
	if b := readAll(t, mustSend(t, p, provider.Chat, chatBody, false)); string(b) != `{"custom":true}` {
		t.Fatalf("5: %s", b)
	}
	_, err = send(t, p, provider.Chat, chatBody, false)
	if pe := asError(t, err); pe.Status != 502 {
		t.Fatalf("script exhausted, config fault expected: %+v", pe)
	}
	if p.Calls() != 6 {
		t.Fatalf("Calls %d", p.Calls())
	}
}

func TestScriptStreamFaults(t *testing.T) {
	t.Run("garbage first", func(t *testing.T) {
		p := New("g", config.Mock{})
		p.Script(Fault{Garbage: true})
		evs := parseSSE(t, readAll(t, mustSend(t, p, provider.Chat, chatBody, true)))
		if len(evs) != 1 || json.Valid([]byte(evs[0].Data)) {
			t.Fatalf("%+v", evs)
		}
	})
	t.Run("garbage after 2", func(t *testing.T) {
		p := New("g", config.Mock{})
		p.Script(Fault{Garbage: true, CutAfter: 2})
		evs := parseSSE(t, readAll(t, mustSend(t, p, provider.Responses, respBody, true)))
		if len(evs) != 4+2+1 || json.Valid([]byte(evs[6].Data)) || !json.Valid([]byte(evs[5].Data)) {
			t.Fatalf("%+v", evs)
		}
	})
	t.Run("cut overrides config", func(t *testing.T) {
		p := New("g", config.Mock{CutAfterChunks: 1})
		p.Script(Fault{CutAfter: 2}, Fault{})
		r := mustSend(t, p, provider.Completions, compBody, true)
		b, err := io.ReadAll(r.Body)
		if !errors.Is(err, io.ErrUnexpectedEOF) || len(parseSSE(t, b)) != 2 {
			t.Fatalf("%v %s", err, b)
		}
		// Fault{} replaces the config's cut: the stream completes.
		if b := readAll(t, mustSend(t, p, provider.Completions, compBody, true)); !bytes.HasSuffix(b, []byte("data: [DONE]\n\n")) {
			t.Fatalf("%s", b)
		}
	})
	t.Run("ttft and header", func(t *testing.T) {
		p := New("g", config.Mock{})
		p.Script(Fault{TTFT: 30 * time.Millisecond, Header: http.Header{"X-Test": {"1"}}})
		start := time.Now()
		r := mustSend(t, p, provider.Chat, chatBody, true)
		if r.Header.Get("X-Test") != "1" || r.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("header %v", r.Header)
		}
		readAll(t, r)
		if time.Since(start) < 30*time.Millisecond {
			t.Fatal("TTFT not applied")
		}
	})
}

func TestConcurrent(t *testing.T) {
	p := New("c", config.Mock{FailFirst: 10, Tokens: 8})
	var wg sync.WaitGroup
	var mu sync.Mutex
	fails := 0
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%5 == 0 {
				p.Script(Fault{})
			}
			r, err := p.Send(context.Background(), &provider.Request{Endpoint: provider.Chat, Body: []byte(chatBody), Stream: i%2 == 0})
			if err != nil {
				mu.Lock()
				fails++
				mu.Unlock()
				return
			}
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}()
	}
	wg.Wait()
	if p.Calls() != 50 || fails > 10 {
		t.Fatalf("calls %d fails %d", p.Calls(), fails)
	}
}

func BenchmarkChatUnary(b *testing.B) {
	p := New("b", config.Mock{})
	for b.Loop() {
		r := mustSend(b, p, provider.Chat, chatBody, false)
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
}

func BenchmarkChatStream(b *testing.B) {
	p := New("b", config.Mock{})
	for b.Loop() {
		r := mustSend(b, p, provider.Chat, chatBody, true)
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
}
