package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/sjson"

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

// BenchmarkRewriteModel measures the only body change the gateway makes
// before sending upstream: "model" replaced by the provider's name, through
// sjson (what proxy.request does), through the whole request builder, and
// against the decode/re-encode a naive gateway would do.
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
		b.Run(tc.name+"/request", func(b *testing.B) {
			p := &Proxy{}
			c := &Call{Endpoint: provider.Chat, Body: tc.body, Stream: true,
				Header: http.Header{"Openai-Organization": {"org-1"}}}
			cand := &route.Candidate{Provider: "fireworks", Type: "openai",
				Model: "accounts/fireworks/models/llama-v3p3-70b-instruct", Keys: []string{"k1", "k2"},
				Header: http.Header{"X-Title": {"switchboard"}}}
			b.SetBytes(int64(len(tc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := p.request(c, cand); err != nil {
					b.Fatal(err)
				}
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
