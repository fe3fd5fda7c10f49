package cache

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"switchboard/internal/clock"
)

func TestFinished(t *testing.T) {
	for _, tc := range []struct {
		name, proto string
		stream      bool
		body        string
		why         string
	}{
		{"chat stop", ProtoChat, false, `{"choices":[{"finish_reason":"stop"}]}`, ""},
		{"chat tools", ProtoChat, false, `{"choices":[{"finish_reason":"tool_calls"}]}`, ""},
		{"chat length", ProtoChat, false, `{"choices":[{"finish_reason":"length"}]}`, "truncated"},
		{"chat one of two cut", ProtoChat, false, `{"choices":[{"finish_reason":"stop"},{"finish_reason":"length"}]}`, "truncated"},
		{"chat filtered", ProtoChat, false, `{"choices":[{"finish_reason":"content_filter"}]}`, "truncated"},
		{"error body", ProtoChat, false, `{"error":{"message":"x"}}`, "error"},
		{"not json", ProtoChat, false, `oops`, "error"},
		{"completions", ProtoCompletions, false, `{"choices":[{"finish_reason":"stop"}]}`, ""},
		{"embeddings", ProtoEmbeddings, false, `{"data":[{"embedding":[1]}]}`, ""},
		{"embeddings empty", ProtoEmbeddings, false, `{"data":[]}`, "empty"},
		{"responses", ProtoResponses, false, `{"status":"completed","error":null}`, ""},
		{"responses incomplete", ProtoResponses, false, `{"status":"incomplete"}`, "truncated"},
		{"messages", ProtoMessages, false, `{"type":"message","stop_reason":"end_turn"}`, ""},
		{"messages max_tokens", ProtoMessages, false, `{"type":"message","stop_reason":"max_tokens"}`, "truncated"},
		{"gemini", ProtoGemini, false, `{"candidates":[{"finishReason":"STOP"}]}`, ""},
		{"gemini max", ProtoGemini, false, `{"candidates":[{"finishReason":"MAX_TOKENS"}]}`, "truncated"},

		{"chat stream", ProtoChat, true, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", ""},
		{"chat stream no done", ProtoChat, true, "data: {\"choices\":[{\"finish_reason\":\"stop\"}]}\n\n", "incomplete"},
		{"chat stream error", ProtoChat, true, "data: {\"choices\":[{\"delta\":{}}]}\n\ndata: {\"error\":{\"message\":\"cut\"}}\n\ndata: [DONE]\n\n", "error"},
		{"chat stream length", ProtoChat, true, "data: {\"choices\":[{\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n", "truncated"},
		{"chat stream cut mid-event", ProtoChat, true, "data: {\"choices\":[{\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\ndata: {\"cho", "incomplete"},
		{"messages stream", ProtoMessages, true, "event: message_start\ndata: {}\n\nevent: message_delta\ndata: {\"delta\":{\"stop_reason\":\"end_turn\"}}\n\nevent: message_stop\ndata: {}\n\n", ""},
		{"messages stream error", ProtoMessages, true, "event: message_start\ndata: {}\n\nevent: error\ndata: {\"type\":\"error\"}\n\n", "error"},
		{"messages stream no stop", ProtoMessages, true, "event: message_start\ndata: {}\n\n", "incomplete"},
		{"responses stream", ProtoResponses, true, "event: response.created\ndata: {}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\"}\n\n", ""},
		{"responses stream failed", ProtoResponses, true, "event: response.created\ndata: {}\n\nevent: response.failed\ndata: {}\n\n", "truncated"},
		{"responses stream unfinished", ProtoResponses, true, "event: response.created\ndata: {}\n\n", "incomplete"},
		{"gemini stream", ProtoGemini, true, "data: {\"candidates\":[{\"content\":{}}]}\n\ndata: {\"candidates\":[{\"finishReason\":\"STOP\"}]}\n\n", ""},
		{"gemini stream unfinished", ProtoGemini, true, "data: {\"candidates\":[{\"content\":{}}]}\n\n", "incomplete"},
		{"gemini array stream", ProtoGemini, true, "[{\"candidates\":[{\"content\":{}}]}\n,{\"candidates\":[{\"finishReason\":\"STOP\"}]}]", ""},
		{"gemini array stream cut", ProtoGemini, true, "[{\"candidates\":[{\"content\":{}}]}\n,{\"cand", "incomplete"},
		{"gemini array stream error", ProtoGemini, true, "[{\"candidates\":[{\"content\":{}}]},{\"error\":{\"code\":500}}]", "error"},
	} {
		if got := finished(tc.proto, tc.stream, [][]byte{[]byte(tc.body)}); got != tc.why {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.why)
		}
	}
}

// failing is a store that is down; slow one that never answers before
// the deadline.
type failing struct{ slow bool }

func (f failing) Get(ctx context.Context, _, _ string) (*Entry, error) {
	if f.slow {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, errors.New("connection refused")
}

func (f failing) Put(ctx context.Context, _ string, _ *Entry, _ Bounds) (bool, error) {
	if f.slow {
		<-ctx.Done()
		return false, ctx.Err()
	}
	return false, errors.New("connection refused")
}

func (failing) Close() error { return nil }

func policy() *Policy {
	return &Policy{Bounds: Bounds{MaxBytes: 1 << 20, TTL: time.Hour}, MaxEntry: 1 << 16}
}

const chatBody = `{"model":"m","temperature":0,"messages":[{"role":"user","content":"hi"}]}`

// serveChat runs l's miss through its recorder with a complete answer.
func serveChat(t *testing.T, l *Lookup, body string) {
	t.Helper()
	rec := l.Recorder(httptest.NewRecorder())
	if rec == nil {
		t.Fatal("a miss handed out no recorder")
	}
	rec.Header().Set("Content-Type", "application/json")
	rec.Header().Set("X-Request-Id", "req_1")
	rec.WriteHeader(200)
	_, _ = rec.Write([]byte(body))
	rec.Flush()
	rec.Note(Note{Complete: true, CostNano: 42, Priced: true, Provider: "p"})
	l.Finish(context.Background(), rec)
}

func TestLookupHitMissBypass(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	reg := prometheus.NewRegistry()
	c := New(Options{Store: NewMemory(clk.Now), Clock: clk, Registerer: reg})
	ctx := context.Background()
	r := func(h ...string) *Request {
		hd := http.Header{}
		for i := 0; i+1 < len(h); i += 2 {
			hd.Set(h[i], h[i+1])
		}
		return &Request{Protocol: ProtoChat, Model: "m", Tenant: "t", Body: []byte(chatBody), Header: hd}
	}
	l := c.Lookup(ctx, policy(), r(), nil)
	if l.Result != Miss {
		t.Fatalf("first lookup: %s", l.Result)
	}
	answer := `{"choices":[{"finish_reason":"stop","message":{"content":"x"}}]}`
	serveChat(t, l, answer)
	clk.Advance(90 * time.Second)
	l = c.Lookup(ctx, policy(), r(), nil)
	if l.Result != Hit || string(l.Entry.Body()) != answer || l.Age != 90*time.Second || l.Entry.CostNano != 42 {
		t.Fatalf("second lookup: %+v", l)
	}
	if l.Entry.Header.Get("X-Request-Id") != "" || l.Entry.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("kept headers: %v", l.Entry.Header)
	}
	if l.Recorder(httptest.NewRecorder()) != nil {
		t.Fatal("a hit would be recorded again")
	}
	if l := c.Lookup(ctx, policy(), r("Cache-Control", "max-age=60"), nil); l.Result != Miss {
		t.Fatalf("max-age=60 took a 90 s old entry: %s", l.Result)
	}
	for _, tc := range []struct {
		h      []string
		reason string
		store  bool
	}{
		{[]string{"Cache-Control", "no-cache"}, "no-cache", true},
		{[]string{"Cache-Control", "no-store"}, "no-store", false},
	} {
		l := c.Lookup(ctx, policy(), r(tc.h...), nil)
		if l.Result != Bypass || l.Reason != tc.reason || (l.Recorder(httptest.NewRecorder()) != nil) != tc.store {
			t.Fatalf("%v: %+v", tc.h, l)
		}
	}
	sampled := &Request{Protocol: ProtoChat, Model: "m", Body: []byte(`{"messages":[]}`)}
	if l := c.Lookup(ctx, policy(), sampled, nil); l.Result != Bypass || l.Reason != "sampled" {
		t.Fatalf("sampled: %+v", l)
	}
	p := policy()
	p.Sampled = true
	if l := c.Lookup(ctx, p, sampled, nil); l.Result != Miss {
		t.Fatalf("sampled: true: %+v", l)
	}
	if got := count(c.m.lookups.WithLabelValues("m", Hit)); got != 1 {
		t.Fatalf("hits counted %v", got)
	}
}

// A recorded answer that is not complete, too large or an error is not
// stored.
func TestFinishStoresOnlyCompleteAnswers(t *testing.T) {
	c := New(Options{Store: NewMemory(nil)})
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		write func(*Recorder)
	}{
		{"not noted complete", func(w *Recorder) { _, _ = w.Write([]byte(`{"choices":[{"finish_reason":"stop"}]}`)) }},
		{"error status", func(w *Recorder) {
			w.WriteHeader(500)
			_, _ = w.Write([]byte(`{"choices":[{"finish_reason":"stop"}]}`))
			w.Note(Note{Complete: true})
		}},
		{"over the entry bound", func(w *Recorder) {
			_, _ = w.Write([]byte(`{"choices":[{"finish_reason":"stop"}],"pad":"` + strings.Repeat("p", 1<<16) + `"}`))
			w.Note(Note{Complete: true})
		}},
		{"truncated", func(w *Recorder) {
			_, _ = w.Write([]byte(`{"choices":[{"finish_reason":"length"}]}`))
			w.Note(Note{Complete: true})
		}},
	} {
		body := strings.Replace(chatBody, "hi", tc.name, 1)
		rq := &Request{Protocol: ProtoChat, Model: "m", Body: []byte(body)}
		l := c.Lookup(ctx, policy(), rq, nil)
		rec := l.Recorder(httptest.NewRecorder())
		tc.write(rec)
		l.Finish(ctx, rec)
		if again := c.Lookup(ctx, policy(), rq, nil); again.Result != Miss {
			t.Errorf("%s: stored", tc.name)
		}
	}
}

// A store that is down, or slow past the deadline, is a miss; the answer
// is served all the same.
func TestStoreDownIsAMiss(t *testing.T) {
	for _, slow := range []bool{false, true} {
		c := New(Options{Store: failing{slow: slow}, Timeout: 20 * time.Millisecond})
		start := time.Now()
		l := c.Lookup(context.Background(), policy(), &Request{Protocol: ProtoChat, Model: "m", Body: []byte(chatBody)}, nil)
		if l.Result != Miss {
			t.Fatalf("slow=%v: %s", slow, l.Result)
		}
		serveChat(t, l, `{"choices":[{"finish_reason":"stop"}]}`)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("slow=%v: took %v", slow, d)
		}
		if got := count(c.m.errors.WithLabelValues("get")); got != 1 {
			t.Fatalf("slow=%v: get errors %v", slow, got)
		}
	}
}

// The semantic lookup finds a differently worded question of the same
// group above the threshold, and nothing below it or in another group.
func TestSemanticLookup(t *testing.T) {
	ctx := context.Background()
	c := New(Options{Store: NewMemory(nil), Index: NewMemoryIndex(100, nil)})
	p := policy()
	p.Semantic = &Semantic{Model: "emb", Threshold: 0.95, Timeout: time.Second}
	vectors := map[string][]float64{
		"what is the capital of France": {1, 0, 0},
		"capital of France?":            {0.99, 0.1, 0},
		"capital of Germany?":           {0.6, 0.8, 0},
	}
	calls := 0
	embed := func(_ context.Context, model, text string) ([]float64, error) {
		calls++
		if model != "emb" {
			t.Errorf("embedded with %q", model)
		}
		v, ok := vectors[text]
		if !ok {
			return nil, errors.New("unknown text")
		}
		return v, nil
	}
	ask := func(q string, extra string) *Request {
		return &Request{Protocol: ProtoChat, Model: "m", Tenant: "t",
			Body: []byte(`{"temperature":0` + extra + `,"messages":[{"role":"user","content":"` + q + `"}]}`)}
	}
	l := c.Lookup(ctx, p, ask("what is the capital of France", ""), embed)
	if l.Result != Miss {
		t.Fatal(l.Result)
	}
	serveChat(t, l, `{"choices":[{"finish_reason":"stop","message":{"content":"Paris"}}]}`)
	if l := c.Lookup(ctx, p, ask("capital of France?", ""), embed); l.Result != Hit || l.Similarity < 0.95 || !strings.Contains(string(l.Entry.Body()), "Paris") {
		t.Fatalf("near question: %+v", l)
	}
	if l := c.Lookup(ctx, p, ask("capital of Germany?", ""), embed); l.Result != Miss {
		t.Fatalf("a question below the threshold hit: %+v", l)
	}
	if l := c.Lookup(ctx, p, ask("capital of France?", `,"max_tokens":3`), embed); l.Result != Miss {
		t.Fatalf("other parameters hit: %+v", l)
	}
	other := ask("capital of France?", "")
	other.Tenant = "u"
	if l := c.Lookup(ctx, p, other, embed); l.Result != Miss {
		t.Fatalf("another tenant hit: %+v", l)
	}
	// An embedding that fails leaves the exact lookup: a miss, not an error.
	if l := c.Lookup(ctx, p, ask("unknown", ""), embed); l.Result != Miss {
		t.Fatal(l.Result)
	}
	if calls != 6 {
		t.Fatalf("%d embedding calls", calls)
	}
}

func TestMemoryIndexBounds(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	x := NewMemoryIndex(300, clk.Now)
	ctx := context.Background()
	unit := func(i int) []float32 {
		a := float64(i) / 1000
		return []float32{float32(math.Cos(a)), float32(math.Sin(a))}
	}
	for i := range MaxGroupVectors + 10 {
		_ = x.Add(ctx, "g", string(rune('a'+i%26))+string(rune(i)), unit(i), time.Hour)
	}
	for i := range 100 {
		_ = x.Add(ctx, "h", string(rune(i)), unit(i), time.Hour)
	}
	if x.Len() != 300 {
		t.Fatalf("%d vectors held", x.Len())
	}
	clk.Advance(2 * time.Hour)
	if k, _, _ := x.Nearest(ctx, "h", unit(5), 0.5); k != "" {
		t.Fatal("an expired vector matched")
	}
}

func count(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}

// The recorder cuts a stream where the handler flushed, so a replay
// writes the same groups of events.
func TestRecorderChunks(t *testing.T) {
	rec := NewRecorder(httptest.NewRecorder(), 1<<10)
	rec.Header().Set("Content-Type", "text/event-stream")
	for _, w := range []string{"data: {\"choices\":[{\"delta\":{}}]}\n\n", "data: {\"choices\":[{\"delta\":{}}]}\n\n", "|",
		"data: {\"choices\":[{\"finish_reason\":\"stop\"}]}\n\n", "|", "|", "data: [DONE]\n\n", "|"} {
		if w == "|" {
			rec.Flush()
			continue
		}
		_, _ = rec.Write([]byte(w))
	}
	rec.Note(Note{Complete: true})
	e, why := rec.entry(ProtoChat, true)
	if e == nil || len(e.Chunks) != 3 || !strings.HasPrefix(string(e.Chunks[2]), "data: [DONE]") || e.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%q %+v", why, e)
	}
}
