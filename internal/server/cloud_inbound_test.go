package server

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// OpenAI Responses and Gemini clients through every cloud, unary and
// streamed: the bridge translates for each cloud's own protocol, and the
// answer carries the cloud's text in the client's protocol.
func TestCloudResponsesAndGemini(t *testing.T) {
	c := startClouds(t)
	for model, m := range cloudModels {
		t.Run(model, func(t *testing.T) {
			key := "k-" + model
			a := c.g.post("/v1/responses", `{"model":"`+model+`","max_output_tokens":64,"input":"hi"}`, "Authorization", "Bearer "+key)
			if a.Status != 200 || !strings.Contains(gjson.Get(a.Body, "output.#(type==\"message\").content.0.text").String(), m.says) {
				t.Fatalf("responses: %d %s", a.Status, a.Body)
			}
			evs := cloudStream(t, c.g, key, "/v1/responses", `{"model":"`+model+`","max_output_tokens":64,"stream":true,"input":"hi"}`)
			text, done := "", false
			for _, e := range evs {
				switch gjson.Get(e, "type").String() {
				case "response.output_text.delta":
					text += gjson.Get(e, "delta").String()
				case "response.completed":
					done = true
				}
			}
			if !strings.Contains(text, m.says) || !done {
				t.Fatalf("responses stream text %q, completed %v: %q", text, done, evs)
			}
			g := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":64}}`
			a = c.g.post("/v1beta/models/"+model+":generateContent", g, "x-goog-api-key", key)
			if a.Status != 200 || !strings.Contains(gjson.Get(a.Body, "candidates.0.content.parts.0.text").String(), m.says) {
				t.Fatalf("gemini: %d %s", a.Status, a.Body)
			}
			evs = cloudStream(t, c.g, key, "/v1beta/models/"+model+":streamGenerateContent?alt=sse&key="+key, g)
			text, stop := "", false
			for _, e := range evs {
				text += gjson.Get(e, "candidates.0.content.parts.0.text").String()
				stop = stop || gjson.Get(e, "candidates.0.finishReason").String() != ""
			}
			if !strings.Contains(text, m.says) || !stop {
				t.Fatalf("gemini stream text %q, finished %v: %q", text, stop, evs)
			}
		})
	}
}
