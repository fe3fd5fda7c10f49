package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"switchboard/internal/tags"
	"switchboard/internal/tracing/otlptest"
)

// TestTraceClouds: a request served by Azure, Bedrock or Vertex AI is one
// trace like any other: the server span with the request's tags, the
// attempt's client span named for the cloud (gen_ai.provider.name by its
// type, its host being a local stand-in) with the cloud's own token
// counts, and the cloud got that attempt's traceparent (on Bedrock inside
// the SigV4 signature, which the stand-in checks). An Anthropic Messages
// stream, translated for the clouds that do not speak it, ends its
// attempt span with the stream's outcome and usage.
func TestTraceClouds(t *testing.T) {
	c := startClouds(t)
	rcv := otlptest.Start(t)
	tr := traceTo(t, rcv)
	c.g.SetTracer(tr)
	fakes := map[string]*cloudFake{"az": c.azure, "br": c.bedrock, "vx": c.vertx}
	system := map[string]string{"az": "azure.ai.openai", "br": "aws.bedrock", "vx": "gcp.vertex_ai"}
	models := make([]string, 0, len(cloudModels))
	for m := range cloudModels {
		models = append(models, m)
	}
	slices.Sort(models)
	for i, model := range models {
		m, cloud := cloudModels[model], model[:2]
		t.Run(model, func(t *testing.T) {
			for j, tc := range []struct{ path, body string }{
				{"/v1/chat/completions", `{"model":"` + model + `","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`},
				{"/v1/messages", `{"model":"` + model + `","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
			} {
				trace := fmt.Sprintf("4bf92f3577b34da6a3ce929d0e0e%02d%02d", i, j)
				a := c.g.post(tc.path, tc.body, "x-api-key", "k-"+model, "anthropic-version", "2023-06-01",
					"Traceparent", "00-"+trace+"-00f067aa0ba902b7-01", tags.Header, "team=cloud")
				if a.Status != 200 {
					t.Fatalf("%s: %d %s", tc.path, a.Status, a.Body)
				}
				spans := spansOf(t, tr, rcv, trace, 2)
				server := otlptest.Named(spans, "POST "+tc.path)
				if len(spans) != 2 || len(server) != 1 || server[0].Attrs["switchboard.tag.team"] != "cloud" {
					t.Fatalf("%s: want the server span (tagged) and one attempt: %+v", tc.path, spans)
				}
				at := spans[0]
				if at.SpanID == server[0].SpanID {
					at = spans[1]
				}
				x := at.Attrs
				if at.ParentID != server[0].SpanID || at.Kind != 3 || x["gen_ai.provider.name"] != system[cloud] ||
					x["switchboard.provider"] != cloud || x["gen_ai.usage.output_tokens"] != m.usage[1] {
					t.Fatalf("%s: attempt %s %+v", tc.path, at.Name, x)
				}
				if tc.path == "/v1/chat/completions" && x["gen_ai.usage.input_tokens"] != m.usage[0] {
					t.Fatalf("unary input tokens %v, want %d", x["gen_ai.usage.input_tokens"], m.usage[0])
				}
				if tc.path == "/v1/messages" && x["switchboard.stream.outcome"] != "completed" {
					t.Fatalf("stream attempt %+v", x)
				}
				if got, want := fakes[cloud].lastParent(), "00-"+trace+"-"+at.SpanID+"-01"; got != want {
					t.Fatalf("%s: the cloud got traceparent %q, want the attempt's %q", tc.path, got, want)
				}
				if strings.Contains(fmt.Sprint(x), "hi from") {
					t.Fatal("answer text on a span without tracing.capture_content")
				}
			}
		})
	}
}
