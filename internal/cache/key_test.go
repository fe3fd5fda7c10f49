package cache

import (
	"net/http"
	"testing"
)

func req(proto, body string) *Request {
	return &Request{Protocol: proto, Model: "m", Tenant: "acme", Body: []byte(body)}
}

// The key ignores what does not change the answer (field order,
// whitespace, escapes, number spelling, bookkeeping fields) and holds
// everything that does.
func TestKeyCanonical(t *testing.T) {
	base := `{"model":"m","temperature":0,"messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	same := []struct{ name, body string }{
		{"reordered", `{"max_tokens":5,"messages":[{"content":"hi","role":"user"}],"temperature":0,"model":"m"}`},
		{"whitespace", "{ \"model\" : \"m\",\n \"temperature\": 0 , \"messages\": [ {\"role\":\"user\", \"content\":\"hi\"} ], \"max_tokens\": 5 }"},
		{"escapes", `{"model":"m","temperature":0,"messages":[{"role":"user","content":"\u0068i"}],"max_tokens":5}`},
		{"number spelling", `{"model":"m","temperature":0.0,"messages":[{"role":"user","content":"hi"}],"max_tokens":5e0}`},
		{"bookkeeping", `{"model":"m","temperature":0,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"user":"u1","metadata":{"a":"b"},"store":true}`},
		{"stream false", `{"model":"m","stream":false,"temperature":0,"messages":[{"role":"user","content":"hi"}],"max_tokens":5}`},
		{"other model name in body", `{"model":"alias","temperature":0,"messages":[{"role":"user","content":"hi"}],"max_tokens":5}`},
	}
	want := req(ProtoChat, base).key(false, "")
	for _, tc := range same {
		if got := req(ProtoChat, tc.body).key(false, ""); got != want {
			t.Errorf("%s: key differs", tc.name)
		}
	}
	differ := []struct {
		name string
		r    *Request
	}{
		{"content", req(ProtoChat, `{"temperature":0,"messages":[{"role":"user","content":"hi!"}],"max_tokens":5}`)},
		{"max_tokens", req(ProtoChat, `{"temperature":0,"messages":[{"role":"user","content":"hi"}],"max_tokens":6}`)},
		{"a nested field", req(ProtoChat, `{"temperature":0,"messages":[{"role":"user","content":"hi","name":"x"}],"max_tokens":5}`)},
		{"message order", req(ProtoChat, `{"temperature":0,"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}],"max_tokens":5}`)},
		{"protocol", req(ProtoResponses, base)},
		{"tenant", &Request{Protocol: ProtoChat, Model: "m", Tenant: "other", Body: []byte(base)}},
		{"model", &Request{Protocol: ProtoChat, Model: "m2", Tenant: "acme", Body: []byte(base)}},
		{"stream", &Request{Protocol: ProtoChat, Model: "m", Tenant: "acme", Stream: true, Body: []byte(base)}},
		{"beta header", &Request{Protocol: ProtoChat, Model: "m", Tenant: "acme", Body: []byte(base),
			Header: http.Header{"Anthropic-Beta": {"x"}}}},
		{"20-digit seed", req(ProtoChat, `{"temperature":0,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"seed":12345678901234567891}`)},
	}
	seen := map[string]string{want: "base"}
	for _, tc := range differ {
		k := tc.r.key(false, "")
		if prev, ok := seen[k]; ok {
			t.Errorf("%s: same key as %s", tc.name, prev)
		}
		seen[k] = tc.name
	}
	seed := req(ProtoChat, `{"temperature":0,"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"seed":12345678901234567890}`)
	if seen[seed.key(false, "")] != "" {
		t.Error("two seeds that round to one float64 share a key")
	}
	// scope: global shares across tenants.
	other := &Request{Protocol: ProtoChat, Model: "m", Tenant: "other", Body: []byte(base)}
	if req(ProtoChat, base).key(true, "") != other.key(true, "") {
		t.Error("global scope still separates tenants")
	}
}

func TestSampled(t *testing.T) {
	for _, tc := range []struct {
		proto, body string
		want        bool
	}{
		{ProtoChat, `{"temperature":0}`, false},
		{ProtoChat, `{"temperature":0.7}`, true},
		{ProtoChat, `{}`, true}, // OpenAI's default is 1
		{ProtoChat, `{"temperature":"0"}`, true},
		{ProtoMessages, `{"temperature":0}`, false},
		{ProtoMessages, `{}`, true},
		{ProtoResponses, `{"temperature":0}`, false},
		{ProtoGemini, `{"generationConfig":{"temperature":0}}`, false},
		{ProtoGemini, `{"temperature":0}`, true},
		{ProtoEmbeddings, `{}`, false},
	} {
		if got := req(tc.proto, tc.body).Sampled(); got != tc.want {
			t.Errorf("%s %s: sampled %v", tc.proto, tc.body, got)
		}
	}
}

func TestLastUser(t *testing.T) {
	for _, tc := range []struct {
		proto, body, text, path string
		ok                      bool
	}{
		{ProtoChat, `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`, "c", "messages.2.content", true},
		{ProtoChat, `{"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}]}]}`, "x\ny", "messages.0.content", true},
		{ProtoChat, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}]}`, "", "", false},
		{ProtoChat, `{"messages":[{"role":"system","content":"s"}]}`, "", "", false},
		{ProtoMessages, `{"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}]}`, "q", "messages.0.content", true},
		{ProtoResponses, `{"input":"hello"}`, "hello", "input", true},
		{ProtoResponses, `{"input":[{"role":"user","content":[{"type":"input_text","text":"r"}]}]}`, "r", "input.0.content", true},
		{ProtoCompletions, `{"prompt":"p"}`, "p", "prompt", true},
		{ProtoGemini, `{"contents":[{"role":"user","parts":[{"text":"g"}]}]}`, "g", "contents.0.parts", true},
		{ProtoEmbeddings, `{"input":"e"}`, "", "", false},
	} {
		text, path, ok := req(tc.proto, tc.body).lastUser()
		if text != tc.text || path != tc.path || ok != tc.ok {
			t.Errorf("%s %s: got %q %q %v", tc.proto, tc.body, text, path, ok)
		}
	}
	// The semantic group leaves the last user message out, nothing else.
	a := req(ProtoChat, `{"temperature":0,"messages":[{"role":"user","content":"what is 2+2"}]}`)
	b := req(ProtoChat, `{"temperature":0,"messages":[{"role":"user","content":"what's 2 + 2?"}]}`)
	c := req(ProtoChat, `{"temperature":0,"max_tokens":9,"messages":[{"role":"user","content":"what is 2+2"}]}`)
	_, pa, _ := a.lastUser()
	_, pb, _ := b.lastUser()
	_, pc, _ := c.lastUser()
	if a.key(false, pa) != b.key(false, pb) || a.key(false, pa) == c.key(false, pc) || a.key(false, pa) == a.key(false, "") {
		t.Error("semantic groups are not the request minus its last user message")
	}
}

func TestDirectives(t *testing.T) {
	for _, tc := range []struct {
		v                string
		noStore, noCache bool
		maxAge           int64
	}{
		{"", false, false, -1},
		{"no-store", true, false, -1},
		{"No-Cache", false, true, -1},
		{"max-age=0", false, true, 0},
		{"private, max-age=60", false, false, 60},
		{"no-cache, no-store", true, true, -1},
	} {
		h := http.Header{}
		if tc.v != "" {
			h.Set("Cache-Control", tc.v)
		}
		ns, nc, ma := directives(h)
		want := tc.maxAge
		if want > 0 {
			want *= 1e9
		}
		if ns != tc.noStore || nc != tc.noCache || int64(ma) != want {
			t.Errorf("%q: %v %v %v", tc.v, ns, nc, ma)
		}
	}
}

func BenchmarkKey(b *testing.B) {
	r := req(ProtoChat, `{"model":"m","temperature":0,"max_tokens":64,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say something about the quick brown fox, please."}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}]}`)
	b.ReportAllocs()
	for b.Loop() {
		_ = r.key(false, "")
	}
}
