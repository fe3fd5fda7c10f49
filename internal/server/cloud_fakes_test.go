package server

// Local stand-ins for Azure OpenAI, Amazon Bedrock and Google Vertex AI,
// for the cloud tests through the real server. Each reads what it gets in
// its own wire shape, checks the credential for real (the Azure key, the
// SigV4 signature, a token the Google stand-in issued), answers with its
// own usage numbers, and counts what it served. Nothing calls a real cloud.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/tidwall/gjson"

	"switchboard/internal/provider/cloud/cloudtest"
)

// Usage each stand-in reports (input, output), distinct per cloud so that
// a test sees whose numbers reached the client.
var (
	azureUsage   = [2]int64{21, 7}
	bedrockUsage = [2]int64{33, 9}
	vertexUsage  = [2]int64{44, 11}
)

// cloudFake is what the three stand-ins share: a recorder and a switch
// that makes every answer a failure.
type cloudFake struct {
	*httptest.Server
	mu    sync.Mutex
	calls []cloudCall
	// fail, when set, is written instead of an answer.
	fail func(w http.ResponseWriter)
	n    atomic.Int32
	// parents are the traceparent headers received, in order.
	parents []string
}

type cloudCall struct {
	path, auth string
	body       []byte
	// problem is what the stand-in found wrong with the request ("" = none).
	problem string
}

func (f *cloudFake) record(c cloudCall) {
	f.n.Add(1)
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
}

func (f *cloudFake) last(t *testing.T) cloudCall {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		t.Fatal("the cloud got no request")
	}
	return f.calls[len(f.calls)-1]
}

// lastParent is the traceparent of the last request ("" when none).
func (f *cloudFake) lastParent() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.parents) == 0 {
		return ""
	}
	return f.parents[len(f.parents)-1]
}

// problems lists what the stand-in found wrong in any request.
func (f *cloudFake) problems() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if c.problem != "" {
			out = append(out, c.path+": "+c.problem)
		}
	}
	return out
}

func (f *cloudFake) start(t *testing.T, h http.HandlerFunc) {
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.parents = append(f.parents, r.Header.Get("Traceparent"))
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(f.Close)
}

// ---- Azure OpenAI ----

// newAzure serves deployment "gpt4o" at api-version 2024-10-21 for key.
// A request with tools is answered with a call to the first tool.
func newAzure(t *testing.T, key string) *cloudFake {
	f := &cloudFake{}
	f.start(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c := cloudCall{path: r.URL.Path, auth: r.Header.Get("api-key"), body: body}
		if r.URL.Path == "/openai/responses" && r.Header.Get("api-key") == key {
			// Azure's Responses API: the deployment is the body's model.
			azureResponses(f, w, r, c, body)
			return
		}
		switch {
		case r.URL.Path != "/openai/deployments/gpt4o/chat/completions":
			c.problem = "unknown path"
		case r.URL.Query().Get("api-version") != "2024-10-21":
			c.problem = "api-version " + r.URL.Query().Get("api-version")
		}
		f.record(c)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Header.Get("api-key") != key:
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}}`))
			return
		case c.problem != "":
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}`))
			return
		case f.fail != nil:
			f.fail(w)
			return
		}
		tool := gjson.GetBytes(body, "tools.0.function.name").String()
		if !gjson.GetBytes(body, "stream").Bool() {
			msg := `{"role":"assistant","content":"hi from azure"}`
			finish := "stop"
			if tool != "" {
				msg = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_az1","type":"function","function":{"name":"` + tool + `","arguments":"{\"city\":\"Paris\"}"}}]}`
				finish = "tool_calls"
			}
			fmt.Fprintf(w, `{"id":"chatcmpl-az1","object":"chat.completion","created":1,"model":"gpt-4o-2024-08-06","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}],"choices":[{"index":0,"message":%s,"finish_reason":%q,"content_filter_results":{}}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
				msg, finish, azureUsage[0], azureUsage[1], azureUsage[0]+azureUsage[1])
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		// Azure opens with its prompt filter results: no choices, no id.
		chunks := []string{`{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}`}
		chunk := func(delta, finish string) string {
			return `{"id":"chatcmpl-az2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `,"content_filter_results":{}}]}`
		}
		if tool != "" {
			chunks = append(chunks, chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_az2","type":"function","function":{"name":"`+tool+`","arguments":""}}]}`, "null"),
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]}`, "null"), chunk(`{}`, `"tool_calls"`))
		} else {
			chunks = append(chunks, chunk(`{"role":"assistant","content":"hi "}`, "null"), chunk(`{"content":"from azure"}`, "null"), chunk(`{}`, `"stop"`))
		}
		if gjson.GetBytes(body, "stream_options.include_usage").Bool() {
			chunks = append(chunks, fmt.Sprintf(`{"id":"chatcmpl-az2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
				azureUsage[0], azureUsage[1], azureUsage[0]+azureUsage[1]))
		}
		for _, c := range chunks {
			fmt.Fprintf(w, "data: %s\n\n", c)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	return f
}

// ---- Amazon Bedrock ----

// newBedrock serves Converse(Stream) for any model and InvokeModel(…
// WithResponseStream) for Claude, to requests signed by one of creds()
// (or carrying bearer, when set) in us-east-1.
func newBedrock(t *testing.T, creds func() []aws.Credentials, bearer string) *cloudFake {
	f := &cloudFake{}
	f.start(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c := cloudCall{path: r.URL.EscapedPath(), auth: r.Header.Get("Authorization"), body: body}
		authorized := bearer != "" && c.auth == "Bearer "+bearer
		if !authorized && creds != nil {
			c.problem = "no credential matched"
			for _, cr := range creds() {
				if err := cloudtest.CheckSigV4(r, body, cr, "us-east-1", "bedrock"); err == nil {
					authorized, c.problem = true, ""
					break
				} else {
					c.problem = err.Error()
				}
			}
		}
		if strings.HasSuffix(r.URL.Path, "/invoke") || strings.HasSuffix(r.URL.Path, "/invoke-with-response-stream") {
			if gjson.GetBytes(body, "anthropic_version").String() != "bedrock-2023-05-31" || gjson.GetBytes(body, "model").Exists() || gjson.GetBytes(body, "stream").Exists() {
				c.problem = "not a Bedrock Anthropic body"
			}
		}
		f.record(c)
		if !authorized {
			w.Header().Set("X-Amzn-ErrorType", "UnrecognizedClientException:http://internal.amazon.com/coral/com.amazon.coral.service/")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"message":"The security token included in the request is invalid."}`))
			return
		}
		if f.fail != nil {
			f.fail(w)
			return
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/converse"):
			w.Header().Set("Content-Type", "application/json")
			content := `[{"text":"hi from bedrock"}]`
			stop := "end_turn"
			if tool := gjson.GetBytes(body, "toolConfig.tools.0.toolSpec.name").String(); tool != "" {
				content, stop = `[{"toolUse":{"toolUseId":"tooluse_br1","name":"`+tool+`","input":{"city":"Paris"}}}]`, "tool_use"
			}
			fmt.Fprintf(w, `{"output":{"message":{"role":"assistant","content":%s}},"stopReason":%q,"usage":{"inputTokens":%d,"outputTokens":%d,"totalTokens":%d},"metrics":{"latencyMs":80}}`,
				content, stop, bedrockUsage[0], bedrockUsage[1], bedrockUsage[0]+bedrockUsage[1])
		case strings.HasSuffix(r.URL.Path, "/converse-stream"):
			w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
			frames := [][2]string{{"messageStart", `{"role":"assistant"}`}}
			if tool := gjson.GetBytes(body, "toolConfig.tools.0.toolSpec.name").String(); tool != "" {
				frames = append(frames, [2]string{"contentBlockStart", `{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"tooluse_br2","name":"` + tool + `"}}}`},
					[2]string{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{\"city\":\"Paris\"}"}}}`},
					[2]string{"contentBlockStop", `{"contentBlockIndex":0}`}, [2]string{"messageStop", `{"stopReason":"tool_use"}`})
			} else {
				frames = append(frames, [2]string{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"hi "}}`},
					[2]string{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"from bedrock"}}`},
					[2]string{"contentBlockStop", `{"contentBlockIndex":0}`}, [2]string{"messageStop", `{"stopReason":"end_turn"}`})
			}
			frames = append(frames, [2]string{"metadata", fmt.Sprintf(`{"usage":{"inputTokens":%d,"outputTokens":%d,"totalTokens":%d},"metrics":{"latencyMs":80}}`,
				bedrockUsage[0], bedrockUsage[1], bedrockUsage[0]+bedrockUsage[1])})
			for _, fr := range frames {
				_ = cloudtest.Frame(w, fr[0], []byte(fr[1]))
			}
		case strings.HasSuffix(r.URL.Path, "/invoke"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"msg_bdrk_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"hi from bedrock invoke"}],"stop_reason":"end_turn","usage":{"input_tokens":%d,"output_tokens":%d}}`,
				bedrockUsage[0], bedrockUsage[1])
		case strings.HasSuffix(r.URL.Path, "/invoke-with-response-stream"):
			w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
			for _, ev := range anthropicEvents("msg_bdrk_2", "hi from bedrock invoke", bedrockUsage) {
				_ = cloudtest.Chunk(w, ev)
			}
		default:
			http.NotFound(w, r)
		}
	})
	return f
}

// anthropicEvents is a Messages stream of text with usage.
func anthropicEvents(id, text string, u [2]int64) []string {
	return []string{
		fmt.Sprintf(`{"type":"message_start","message":{"id":%q,"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":%d,"output_tokens":1}}}`, id, u[0]),
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, text),
		`{"type":"content_block_stop","index":0}`,
		fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":%d}}`, u[1]),
		`{"type":"message_stop"}`,
	}
}

// ---- Google Vertex AI ----

// newVertex serves Gemini and Claude for project test-project in
// us-east5, to requests whose token g issued.
func newVertex(t *testing.T, g *cloudtest.Google) *cloudFake {
	f := &cloudFake{}
	root := "/v1/projects/test-project/locations/us-east5/publishers/"
	f.start(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c := cloudCall{path: r.URL.Path, auth: r.Header.Get("Authorization"), body: body}
		switch {
		case !strings.HasPrefix(r.URL.Path, root):
			c.problem = "unknown path"
		case strings.HasSuffix(r.URL.Path, ":streamGenerateContent") && r.URL.Query().Get("alt") != "sse":
			c.problem = "stream without alt=sse"
		case strings.Contains(r.URL.Path, "/anthropic/") && (gjson.GetBytes(body, "anthropic_version").String() != "vertex-2023-10-16" || gjson.GetBytes(body, "model").Exists()):
			c.problem = "not a Vertex Anthropic body"
		}
		f.record(c)
		if !g.Valid(c.auth) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":401,"message":"Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.","status":"UNAUTHENTICATED"}}`))
			return
		}
		if f.fail != nil {
			f.fail(w)
			return
		}
		usage := fmt.Sprintf(`"usageMetadata":{"promptTokenCount":%d,"candidatesTokenCount":%d,"totalTokenCount":%d}`, vertexUsage[0], vertexUsage[1], vertexUsage[0]+vertexUsage[1])
		part := `{"text":"hi from gemini"}`
		finish := "STOP"
		if tool := gjson.GetBytes(body, "tools.0.functionDeclarations.0.name").String(); tool != "" {
			part = `{"functionCall":{"name":"` + tool + `","args":{"city":"Paris"}}}`
		}
		switch {
		case strings.HasSuffix(r.URL.Path, ":generateContent"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"candidates":[{"content":{"role":"model","parts":[%s]},"finishReason":%q}],%s,"modelVersion":"gemini-2.5-flash"}`, part, finish, usage)
		case strings.HasSuffix(r.URL.Path, ":streamGenerateContent"):
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[%s]}}]}\n\n", part)
			fmt.Fprintf(w, "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"\"}]},\"finishReason\":%q}],%s}\n\n", finish, usage)
		case strings.HasSuffix(r.URL.Path, ":rawPredict"):
			w.Header().Set("Content-Type", "application/json")
			content := `[{"type":"text","text":"hi from vertex claude"}]`
			stop := "end_turn"
			if tool := gjson.GetBytes(body, "tools.0.name").String(); tool != "" {
				content, stop = `[{"type":"tool_use","id":"toolu_vx1","name":"`+tool+`","input":{"city":"Paris"}}]`, "tool_use"
			}
			fmt.Fprintf(w, `{"id":"msg_vrtx_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":%s,"stop_reason":%q,"usage":{"input_tokens":%d,"output_tokens":%d}}`,
				content, stop, vertexUsage[0], vertexUsage[1])
		case strings.HasSuffix(r.URL.Path, ":streamRawPredict"):
			w.Header().Set("Content-Type", "text/event-stream")
			evs := anthropicEvents("msg_vrtx_2", "hi from vertex claude", vertexUsage)
			if tool := gjson.GetBytes(body, "tools.0.name").String(); tool != "" {
				evs[1] = `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_vx2","name":"` + tool + `","input":{}}}`
				evs[2] = `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"city\":\"Paris\"}"}}`
				evs[4] = strings.Replace(evs[4], "end_turn", "tool_use", 1)
			}
			for _, ev := range evs {
				fmt.Fprintf(w, "event: %s\ndata: %s\n\n", gjson.Get(ev, "type").String(), ev)
			}
		default:
			http.NotFound(w, r)
		}
	})
	return f
}

// cloudStream posts a streamed request with key and returns its data
// payloads.
func cloudStream(t *testing.T, g *gateway, key, path, body string) []string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// usageChunks are the chat chunks that carry usage without a choice.
func usageChunks(events []string) []string {
	var out []string
	for _, e := range events {
		if gjson.Get(e, "usage").IsObject() && len(gjson.Get(e, "choices").Array()) == 0 {
			out = append(out, e)
		}
	}
	return out
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// azureResponses answers Azure's Responses API for deployment gpt4o, as
// one response object or its event stream.
func azureResponses(f *cloudFake, w http.ResponseWriter, r *http.Request, c cloudCall, body []byte) {
	switch {
	case r.URL.Query().Get("api-version") != "2024-10-21":
		c.problem = "api-version " + r.URL.Query().Get("api-version")
	case gjson.GetBytes(body, "model").String() != "gpt4o":
		c.problem = "responses model " + gjson.GetBytes(body, "model").String()
	}
	f.record(c)
	if c.problem != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}`))
		return
	}
	usage := fmt.Sprintf(`{"input_tokens":%d,"output_tokens":%d,"total_tokens":%d}`, azureUsage[0], azureUsage[1], azureUsage[0]+azureUsage[1])
	msg := `{"type":"message","id":"msg_az1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi from azure","annotations":[]}]}`
	done := `{"id":"resp_az1","object":"response","created_at":1,"status":"completed","model":"gpt-4o-2024-08-06","output":[` + msg + `],"usage":` + usage + `}`
	if !gjson.GetBytes(body, "stream").Bool() {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(done))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range [][2]string{
		{"response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_az1","object":"response","created_at":1,"status":"in_progress","model":"gpt-4o-2024-08-06","output":[]}}`},
		{"response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_az1","status":"in_progress","role":"assistant","content":[]}}`},
		{"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_az1","output_index":0,"content_index":0,"delta":"hi from azure"}`},
		{"response.output_item.done", `{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":` + msg + `}`},
		{"response.completed", `{"type":"response.completed","sequence_number":4,"response":` + done + `}`},
	} {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev[0], ev[1])
	}
}
