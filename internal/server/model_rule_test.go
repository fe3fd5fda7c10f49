package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestAnswerModelRule: on every endpoint, unary and streamed, the answer's
// "model" is the provider's model name; the client's name is in
// X-Switchboard-Model and the provider in X-Switchboard-Provider.
func TestAnswerModelRule(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a"))
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		path, body string
	}{
		{"/v1/chat/completions", `{"model":"m",` + msgs + `}`},
		{"/v1/chat/completions", `{"model":"m","stream":true,` + msgs + `}`},
		{"/v1/completions", `{"model":"m","prompt":"hi"}`},
		{"/v1/completions", `{"model":"m","stream":true,"prompt":"hi"}`},
		{"/v1/responses", `{"model":"m","input":"hi"}`},
		{"/v1/responses", `{"model":"m","stream":true,"input":"hi"}`},
		{"/v1/embeddings", `{"model":"m","input":"hi"}`},
		{"/v1/messages", `{"model":"m","max_tokens":50,` + msgs + `}`},
		{"/v1/messages", `{"model":"m","max_tokens":50,"stream":true,` + msgs + `}`},
	}
	for _, tt := range tests {
		name := tt.path
		if strings.Contains(tt.body, `"stream":true`) {
			name += " stream"
		}
		t.Run(name, func(t *testing.T) {
			a := g.post(tt.path, tt.body, "anthropic-version", "2023-06-01")
			if a.Status != http.StatusOK {
				t.Fatalf("%d %s", a.Status, a.Body)
			}
			if a.Header.Get("X-Switchboard-Model") != "m" || a.Header.Get("X-Switchboard-Provider") != "a" {
				t.Errorf("headers: model %q provider %q", a.Header.Get("X-Switchboard-Model"), a.Header.Get("X-Switchboard-Provider"))
			}
			var models []string
			if strings.Contains(tt.body, `"stream":true`) {
				for _, line := range strings.Split(a.Body, "\n") {
					d, ok := strings.CutPrefix(line, "data: ")
					if !ok || !gjson.Valid(d) {
						continue
					}
					for _, p := range []string{"model", "message.model", "response.model"} {
						if m := gjson.Get(d, p); m.Exists() {
							models = append(models, m.String())
						}
					}
				}
			} else {
				models = append(models, gjson.Get(a.Body, "model").String())
			}
			if len(models) == 0 {
				t.Fatalf("no model in the answer: %s", a.Body)
			}
			for _, m := range models {
				if m != "a-model" {
					t.Fatalf("answer model %q, want the provider's a-model: %.400s", m, a.Body)
				}
			}
		})
	}
}
