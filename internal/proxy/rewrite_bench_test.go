package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/sjson"

	"switchboard/internal/clock"
	"switchboard/internal/provider"
	"switchboard/internal/route"
)

// chatBody renders a realistic chat request of about size bytes: a system
// prompt, alternating turns (with some non-ASCII text and escapes), tools,
// and the usual sampling fields. With modelLast the "model" key comes
// after everything else, the worst case for a path rewrite.
func chatBody(size int, modelLast bool) []byte {
	var msgs []string
	msgs = append(msgs, `{"role":"system","content":"You are a careful assistant. Answer briefly, cite sources, and say \"I don't know\" when unsure."}`)
	turn := `{"role":"user","content":"Summarise the attached note about shipment SHP-%05d — it mentions Zürich, 東京 and a \"priority\" flag; list the three open questions."}`
	reply := `{"role":"assistant","content":"Shipment SHP-%05d: delayed at customs in Zürich; the 東京 leg is on schedule. Open questions: 1) who approved the \"priority\" flag, 2) the new ETA, 3) whether the invoice changes."}`
	tools := `"tools":[{"type":"function","function":{"name":"lookup_shipment","description":"Find a shipment by id","parameters":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}}}]`
	rest := `"temperature":0.3,"top_p":1,"max_tokens":512,"stream":true,"stream_options":{"include_usage":true},"user":"tenant-42"`
	model := `"model":"gpt-4o-mini"`
	render := func() string {
		parts := []string{`"messages":[` + strings.Join(msgs, ",") + `]`, tools, rest}
		if modelLast {
			parts = append(parts, model)
		} else {
			parts = append([]string{model}, parts...)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	for i := 0; len(render()) < size; i++ {
		f := turn
		if i%2 == 1 {
			f = reply
		}
		msgs = append(msgs, fmt.Sprintf(f, i))
	}
	return []byte(render())
}

func TestChatBodyIsValid(t *testing.T) {
	for _, n := range []int{2 << 10, 50 << 10} {
		b := chatBody(n, true)
		if !json.Valid(b) || len(b) < n || len(b) > n+400 {
			t.Fatalf("chatBody(%d): %d bytes, valid=%v", n, len(b), json.Valid(b))
		}
		out, err := sjson.SetBytes(b, "model", "upstream-model")
		if err != nil || !json.Valid(out) || !strings.Contains(string(out), `"model":"upstream-model"`) {
			t.Fatalf("rewrite failed: %v", err)
		}
	}
}

// cannedProvider answers every attempt at once with the same unary body.
type cannedProvider struct {
	answer []byte
	sent   int
}

func (p *cannedProvider) Send(_ context.Context, req *provider.Request) (*provider.Response, error) {
	p.sent += len(req.Body)
	return &provider.Response{Status: http.StatusOK, Header: http.Header{}, Body: provider.NopBody(p.answer)}, nil
}

// BenchmarkRewriteModel measures the only body change the gateway makes
// before sending upstream: "model" replaced by the provider's name, through
// sjson (what the attempt loop does), through a whole attempt of the loop
// (rewrite, request build, deadline watcher, reading a canned unary answer;
// no network), and against the decode/re-encode a naive gateway would do.
func BenchmarkRewriteModel(b *testing.B) {
	cases := []struct {
		name string
		body []byte
	}{
		{"2KB", chatBody(2<<10, false)},
		{"2KB-model-last", chatBody(2<<10, true)},
		{"50KB", chatBody(50<<10, false)},
		{"50KB-model-last", chatBody(50<<10, true)},
	}
	for _, tc := range cases {
		b.Run(tc.name+"/sjson", func(b *testing.B) {
			b.SetBytes(int64(len(tc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sjson.SetBytes(tc.body, "model", "accounts/fireworks/models/llama-v3p3-70b-instruct"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/attempt", func(b *testing.B) {
			up := &cannedProvider{answer: []byte(`{"id":"x","object":"chat.completion","choices":[]}`)}
			p := &Proxy{Clock: clock.Real{}}
			rt := &route.Route{Candidates: []*route.Candidate{{Provider: "fireworks", Type: "openai",
				Model: "accounts/fireworks/models/llama-v3p3-70b-instruct", Keys: []string{"k1", "k2"},
				Header: http.Header{"X-Title": {"switchboard"}}, Send: up}}}
			c := &Call{Endpoint: provider.Chat, Body: tc.body, Header: http.Header{"Openai-Organization": {"org-1"}},
				Route: rt, Opts: Options{MaxAttempts: 1, MaxRounds: 1, Deadline: time.Minute}}
			ctx := context.Background()
			b.SetBytes(int64(len(tc.body)))
			b.ReportAllocs()
			for b.Loop() {
				res, fail := p.Do(ctx, c)
				if fail != nil {
					b.Fatalf("attempt failed: %+v", fail)
				}
				res.Close()
			}
			if up.sent == 0 {
				b.Fatal("nothing sent")
			}
		})
		b.Run(tc.name+"/decode-reencode", func(b *testing.B) {
			b.SetBytes(int64(len(tc.body)))
			b.ReportAllocs()
			for b.Loop() {
				var m map[string]any
				if err := json.Unmarshal(tc.body, &m); err != nil {
					b.Fatal(err)
				}
				m["model"] = "accounts/fireworks/models/llama-v3p3-70b-instruct"
				if _, err := json.Marshal(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
