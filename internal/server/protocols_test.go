package server

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	fake "switchboard/e2e/upstream"
)

// The four inbound protocols against the three provider types, each
// unary and streamed, through the real handlers to fake vendor APIs that
// refuse anything their real API would (e2e/upstream): same-protocol
// pairs go untranslated (the upstream gets the client's body with only
// the model rewritten, never the client's key), the others translated.

const (
	protoKey     = "sk-gw-proto"
	protoUpKey   = "up-key-proto"
	protoMarker  = "SBX-0a1b2c3d4e"
	protoUpModel = "up-model-1"
)

// protoGateway serves model "m" from one fake of vendor v.
func protoGateway(t *testing.T, v fake.Vendor) (*gateway, *fake.Server) {
	t.Helper()
	up := fake.New(v, fake.Options{Key: protoUpKey})
	t.Cleanup(up.Close)
	g := startGateway(t, fmt.Sprintf(`providers:
  up: {type: %s, base_url: %q, api_key: %q}
models:
  - name: m
    providers: [{provider: up, model: %s}]
auth: {token: %q}
retries: {max_attempts: 1, max_rounds: 1}
`, v, up.BaseURL(), protoUpKey, protoUpModel, protoKey))
	return g, up
}

// inbound is one client protocol: its request for model m and how to
// read the answer's text.
type inbound struct {
	name   string
	vendor fake.Vendor // whose protocol it is
	path   func(stream bool) string
	body   func(stream bool) string
}

var inbounds = []inbound{
	{"chat", fake.OpenAI, func(bool) string { return "/v1/chat/completions" }, func(s bool) string {
		return fmt.Sprintf(`{"model":"m","stream":%t,"messages":[{"role":"user","content":"say %s"}]}`, s, protoMarker)
	}},
	{"responses", fake.OpenAI, func(bool) string { return "/v1/responses" }, func(s bool) string {
		return fmt.Sprintf(`{"model":"m","stream":%t,"input":"say %s","store":false}`, s, protoMarker)
	}},
	{"messages", fake.Anthropic, func(bool) string { return "/v1/messages" }, func(s bool) string {
		return fmt.Sprintf(`{"model":"m","stream":%t,"max_tokens":64,"messages":[{"role":"user","content":"say %s"}]}`, s, protoMarker)
	}},
	{"gemini", fake.Gemini, func(s bool) string {
		if s {
			return "/v1beta/models/m:streamGenerateContent?alt=sse"
		}
		return "/v1beta/models/m:generateContent"
	}, func(bool) string {
		return fmt.Sprintf(`{"contents":[{"role":"user","parts":[{"text":"say %s"}]}],"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}]}`, protoMarker)
	}},
}

func TestInboundProtocolsAgainstEveryProvider(t *testing.T) {
	for _, v := range []fake.Vendor{fake.Anthropic, fake.OpenAI, fake.Gemini} {
		g, up := protoGateway(t, v)
		for _, in := range inbounds {
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("%s-to-%s/stream=%t", in.name, v, stream)
				t.Run(name, func(t *testing.T) {
					up.Reset()
					body := in.body(stream)
					a := g.post(in.path(stream), body, "Authorization", "Bearer "+protoKey)
					if a.Status != http.StatusOK {
						t.Fatalf("status %d: %s", a.Status, a.Body)
					}
					if want := "ack " + protoMarker; !strings.Contains(a.Body, want) && !strings.Contains(protoStreamText(a.Body), want) {
						t.Fatalf("answer lacks %q: %s", want, a.Body)
					}
					ct := a.Header.Get("Content-Type")
					if stream != strings.HasPrefix(ct, "text/event-stream") {
						t.Errorf("stream=%t answered Content-Type %q", stream, ct)
					}
					reqs := up.Requests()
					if len(reqs) != 1 {
						t.Fatalf("upstream got %d requests, want 1", len(reqs))
					}
					got := reqs[0]
					for k, vs := range got.Header {
						if strings.Contains(strings.Join(vs, " "), protoKey) {
							t.Errorf("the client's key reached the upstream in %s", k)
						}
					}
					native := in.vendor == v && !(in.name == "chat" && v != fake.OpenAI)
					dropped := a.Header.Get("X-Switchboard-Dropped")
					switch {
					case native:
						want := []byte(body)
						if in.vendor != fake.Gemini {
							want, _ = sjson.SetBytes(want, "model", protoUpModel)
						}
						if in.name == "chat" && stream {
							// Metering asks a chat stream for its usage.
							want, _ = sjson.SetBytes(want, "stream_options", map[string]bool{"include_usage": true})
						}
						if !bytes.Equal(got.Body, want) {
							t.Errorf("native pass-through changed the body:\n got %s\nwant %s", got.Body, want)
						}
						if dropped != "" {
							t.Errorf("native answer names dropped hints: %q", dropped)
						}
					case in.name == "gemini":
						if dropped != "safetySettings" {
							t.Errorf("X-Switchboard-Dropped = %q, want safetySettings", dropped)
						}
					case in.name == "responses":
						if dropped != "store" {
							t.Errorf("X-Switchboard-Dropped = %q, want store", dropped)
						}
					}
				})
			}
		}
	}
}

// TestInboundStreamShapes checks each translated stream's own framing:
// the Responses event sequence, Gemini's JSON array without alt=sse.
func TestInboundStreamShapes(t *testing.T) {
	g, _ := protoGateway(t, fake.Anthropic)
	t.Run("responses-events", func(t *testing.T) {
		a := g.post("/v1/responses", inbounds[1].body(true), "Authorization", "Bearer "+protoKey)
		var names []string
		for _, line := range strings.Split(a.Body, "\n") {
			if n, ok := strings.CutPrefix(line, "event: "); ok && (len(names) == 0 || names[len(names)-1] != n) {
				names = append(names, n)
			}
		}
		want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
			"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
			"response.completed"}
		if strings.Join(names, ",") != strings.Join(want, ",") {
			t.Fatalf("events %v\nwant %v", names, want)
		}
	})
	t.Run("gemini-array", func(t *testing.T) {
		a := g.post("/v1beta/models/m:streamGenerateContent", inbounds[3].body(true), "x-goog-api-key", protoKey)
		if a.Status != 200 || a.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("status %d, %q: %s", a.Status, a.Header.Get("Content-Type"), a.Body)
		}
		arr := gjson.Parse(a.Body)
		var text strings.Builder
		arr.ForEach(func(_, ev gjson.Result) bool {
			text.WriteString(ev.Get("candidates.0.content.parts.0.text").String())
			return true
		})
		if !arr.IsArray() || len(arr.Array()) < 2 || !strings.Contains(text.String(), "ack "+protoMarker) {
			t.Fatalf("not a JSON array of events: %s", a.Body)
		}
		last := arr.Array()[len(arr.Array())-1]
		if last.Get("candidates.0.finishReason").String() != "STOP" || !last.Get("usageMetadata.promptTokenCount").Exists() {
			t.Fatalf("last event lacks finishReason and usage: %s", last.Raw)
		}
	})
}

// TestInboundErrorsInTheClientsShape: refusals and failures of each
// protocol are written in that protocol's error shape.
func TestInboundErrorsInTheClientsShape(t *testing.T) {
	gA, upA := protoGateway(t, fake.Anthropic)
	gO, _ := protoGateway(t, fake.OpenAI)
	gG, upG := protoGateway(t, fake.Gemini)
	googleShape := func(t *testing.T, a answer, status int, statusName string) {
		t.Helper()
		e := gjson.Get(a.Body, "error")
		if a.Status != status || e.Get("code").Int() != int64(status) || e.Get("status").String() != statusName || e.Get("message").String() == "" {
			t.Fatalf("want %d %s in Google's shape, got %d: %s", status, statusName, a.Status, a.Body)
		}
	}
	cases := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"gemini bad key", func(t *testing.T) {
			googleShape(t, gG.post("/v1beta/models/m:generateContent", inbounds[3].body(false), "x-goog-api-key", "wrong"), 401, "UNAUTHENTICATED")
		}},
		{"gemini ?key= auth", func(t *testing.T) {
			upG.Reset()
			a := gG.post("/v1beta/models/m:generateContent?key="+protoKey, inbounds[3].body(false))
			if a.Status != 200 {
				t.Fatalf("?key= refused: %d %s", a.Status, a.Body)
			}
			if q := upG.Requests()[0].Query; strings.Contains(q, protoKey) {
				t.Fatalf("the client's ?key= reached the upstream: %s", q)
			}
		}},
		{"gemini unknown model", func(t *testing.T) {
			googleShape(t, gG.post("/v1beta/models/nope:generateContent", inbounds[3].body(false), "x-goog-api-key", protoKey), 404, "NOT_FOUND")
		}},
		{"gemini malformed body", func(t *testing.T) {
			googleShape(t, gO.post("/v1beta/models/m:generateContent", `{"contents":`, "x-goog-api-key", protoKey), 400, "INVALID_ARGUMENT")
		}},
		{"gemini refused field to a translated provider", func(t *testing.T) {
			a := gO.post("/v1beta/models/m:generateContent", `{"cachedContent":"cachedContents/x","contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
				"x-goog-api-key", protoKey)
			googleShape(t, a, 400, "INVALID_ARGUMENT")
			if !strings.Contains(a.Body, "cachedContent") {
				t.Fatalf("the refusal does not name the field: %s", a.Body)
			}
		}},
		{"gemini refused field passes natively", func(t *testing.T) {
			a := gG.post("/v1beta/models/m:generateContent", `{"cachedContent":"cachedContents/x","contents":[{"role":"user","parts":[{"text":"say `+protoMarker+`"}]}]}`,
				"x-goog-api-key", protoKey)
			if a.Status != 200 {
				t.Fatalf("native request refused: %d %s", a.Status, a.Body)
			}
		}},
		{"gemini topK is not sent to openai", func(t *testing.T) {
			a := gO.post("/v1beta/models/m:generateContent", `{"generationConfig":{"topK":64,"temperature":1},"contents":[{"role":"user","parts":[{"text":"say `+protoMarker+`"}]}]}`,
				"x-goog-api-key", protoKey)
			if a.Status != 200 || a.Header.Get("X-Switchboard-Dropped") != "generationConfig.topK" {
				t.Fatalf("want 200 naming generationConfig.topK dropped: %d %q %s", a.Status, a.Header.Get("X-Switchboard-Dropped"), a.Body)
			}
		}},
		{"gemini topK reaches anthropic", func(t *testing.T) {
			upA.Reset()
			a := gA.post("/v1beta/models/m:generateContent", `{"generationConfig":{"topK":64},"contents":[{"role":"user","parts":[{"text":"say `+protoMarker+`"}]}]}`,
				"x-goog-api-key", protoKey)
			if a.Status != 200 || a.Header.Get("X-Switchboard-Dropped") != "" || gjson.GetBytes(upA.Requests()[0].Body, "top_k").Int() != 64 {
				t.Fatalf("top_k not mapped: %d %q", a.Status, a.Header.Get("X-Switchboard-Dropped"))
			}
		}},
		{"gemini upstream error", func(t *testing.T) {
			a := gA.post("/v1beta/models/m:generateContent", `{"contents":[{"role":"user","parts":[{"text":"`+fake.RefuseWord+`"}]}]}`,
				"x-goog-api-key", protoKey)
			googleShape(t, a, 400, "INVALID_ARGUMENT")
		}},
		{"gemini unknown method", func(t *testing.T) {
			googleShape(t, gG.post("/v1beta/models/m:embedContent", `{}`, "x-goog-api-key", protoKey), 404, "NOT_FOUND")
		}},
		{"responses hosted tool to anthropic", func(t *testing.T) {
			a := gA.post("/v1/responses", `{"model":"m","input":"hi","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`,
				"Authorization", "Bearer "+protoKey)
			if a.Status != 400 || gjson.Get(a.Body, "error.param").String() != "tools[0].type" {
				t.Fatalf("want 400 naming tools[0].type: %d %s", a.Status, a.Body)
			}
		}},
		{"messages container to openai", func(t *testing.T) {
			a := gO.post("/v1/messages", `{"model":"m","max_tokens":8,"container":"c1","messages":[{"role":"user","content":"hi"}]}`,
				"x-api-key", protoKey)
			if a.Status != 400 || gjson.Get(a.Body, "type").String() != "error" || !strings.Contains(a.Body, "container") {
				t.Fatalf("want an Anthropic 400 naming container: %d %s", a.Status, a.Body)
			}
		}},
		{"messages container passes to anthropic", func(t *testing.T) {
			upA.Reset()
			a := gA.post("/v1/messages", `{"model":"m","max_tokens":8,"container":"c1","messages":[{"role":"user","content":"say `+protoMarker+`"}]}`,
				"x-api-key", protoKey, "anthropic-beta", "context-management-2025-06-27")
			if a.Status != 200 {
				t.Fatalf("native request refused: %d %s", a.Status, a.Body)
			}
			if h := upA.Requests()[0].Header.Get("Anthropic-Beta"); h != "context-management-2025-06-27" {
				t.Fatalf("beta header not kept: %q", h)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, c.check)
	}
}

// TestCountTokens: an upstream of the client's protocol counts; any other
// gets the gateway's estimate.
func TestCountTokens(t *testing.T) {
	msg := `{"model":"m","messages":[{"role":"user","content":"count these words please"}]}`
	gem := `{"contents":[{"role":"user","parts":[{"text":"count these words please"}]}]}`
	cases := []struct {
		vendor      fake.Vendor
		path, body  string
		field, from string
	}{
		{fake.Anthropic, "/v1/messages/count_tokens", msg, "input_tokens", "provider"},
		{fake.OpenAI, "/v1/messages/count_tokens", msg, "input_tokens", "estimate"},
		{fake.Gemini, "/v1/messages/count_tokens", msg, "input_tokens", "estimate"},
		{fake.Gemini, "/v1beta/models/m:countTokens", gem, "totalTokens", "provider"},
		{fake.Anthropic, "/v1beta/models/m:countTokens", gem, "totalTokens", "estimate"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s%s", c.vendor, c.path), func(t *testing.T) {
			g, up := protoGateway(t, c.vendor)
			a := g.post(c.path, c.body, "x-api-key", protoKey)
			if a.Status != 200 || gjson.Get(a.Body, c.field).Int() <= 0 {
				t.Fatalf("status %d: %s", a.Status, a.Body)
			}
			if got := a.Header.Get("X-Switchboard-Count"); got != c.from {
				t.Fatalf("counted by %q, want %q", got, c.from)
			}
			if calls := len(up.Requests()); (c.from == "provider") != (calls == 1) {
				t.Fatalf("upstream got %d requests", calls)
			}
		})
	}
}

func TestGeminiModelList(t *testing.T) {
	g, _ := protoGateway(t, fake.OpenAI)
	a := g.get("/v1beta/models", "x-goog-api-key", protoKey)
	if a.Status != 200 || gjson.Get(a.Body, "models.0.name").String() != "models/m" {
		t.Fatalf("list: %d %s", a.Status, a.Body)
	}
	a = g.get("/v1beta/models/m", "x-goog-api-key", protoKey)
	if a.Status != 200 || gjson.Get(a.Body, "name").String() != "models/m" {
		t.Fatalf("model: %d %s", a.Status, a.Body)
	}
	if a := g.get("/v1/models/m", "Authorization", "Bearer "+protoKey); gjson.Get(a.Body, "id").String() != "m" {
		t.Fatalf("the OpenAI model route changed: %d %s", a.Status, a.Body)
	}
}

// streamText joins the text pieces of a stream in any of the four
// protocols (chat deltas, Messages text deltas, Gemini parts, Responses
// output_text deltas).
func protoStreamText(body string) string {
	var b strings.Builder
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || !gjson.Valid(data) {
			continue
		}
		ev := gjson.Parse(data)
		b.WriteString(ev.Get("choices.0.delta.content").String())
		b.WriteString(ev.Get("delta.text").String())
		ev.Get("candidates.0.content.parts").ForEach(func(_, p gjson.Result) bool {
			b.WriteString(p.Get("text").String())
			return true
		})
		if ev.Get("type").String() == "response.output_text.delta" {
			b.WriteString(ev.Get("delta").String())
		}
	}
	return b.String()
}

// TestStreamCutEndsInTheClientsErrorEvent: an upstream stream that breaks
// after the first tokens reached the client ends, for each protocol, in
// that protocol's own error event.
func TestStreamCutEndsInTheClientsErrorEvent(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Length", "100000") // never reached: the client sees a cut
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"up\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n")
		fmt.Fprint(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		for _, piece := range []string{"ack ", "SBX-"} {
			fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%q}}\n\n", piece)
		}
		w.(http.Flusher).Flush()
	}))
	t.Cleanup(up.Close)
	g := startGateway(t, fmt.Sprintf(`providers:
  up: {type: anthropic, base_url: %q, api_key: k}
models:
  - name: m
    providers: [{provider: up, model: up}]
auth: {token: %q}
retries: {max_attempts: 1, max_rounds: 1}
`, up.URL+"/v1", protoKey))
	// Messages goes untranslated (native relay), the others translated.
	cases := []struct {
		name, path, body string
		last             func(body string) bool
	}{
		{"gemini sse", "/v1beta/models/m:streamGenerateContent?alt=sse", inbounds[3].body(true), func(b string) bool {
			ev := lastData(b)
			return gjson.Get(ev, "error.status").String() == "UNAVAILABLE" && gjson.Get(ev, "error.code").Int() == 502
		}},
		{"gemini array", "/v1beta/models/m:streamGenerateContent", inbounds[3].body(true), func(b string) bool {
			arr := gjson.Parse(b).Array()
			return gjson.Valid(b) && len(arr) >= 2 && arr[len(arr)-1].Get("error.status").String() == "UNAVAILABLE"
		}},
		{"responses", "/v1/responses", inbounds[1].body(true), func(b string) bool {
			return gjson.Get(lastData(b), "type").String() == "response.failed"
		}},
		{"messages", "/v1/messages", inbounds[2].body(true), func(b string) bool {
			return gjson.Get(lastData(b), "type").String() == "error"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := g.post(c.path, c.body, "Authorization", "Bearer "+protoKey)
			if a.Status != 200 || !strings.Contains(protoStreamText(a.Body)+a.Body, "ack ") || !c.last(a.Body) {
				t.Fatalf("status %d, want the first tokens then the protocol's error event last:\n%s", a.Status, a.Body)
			}
		})
	}
}

// lastData is the data of a stream's last SSE event.
func lastData(body string) string {
	last := ""
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			last = d
		}
	}
	return last
}
