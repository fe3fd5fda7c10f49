package upstream

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

const testKey = "k-test"

var tools = []ToolCall{{Name: "read", Args: map[string]any{"path": "/tmp/m.txt"}}}

// post sends body to path on s with the vendor's auth headers.
func post(t *testing.T, s *Server, path, key, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	switch s.Vendor() {
	case Anthropic:
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	case OpenAI:
		req.Header.Set("Authorization", "Bearer "+key)
	case Gemini:
		req.Header.Set("X-Goog-Api-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// events reads an SSE body into (event name or data type, data) pairs.
func events(t *testing.T, body string) (names []string, data []map[string]any) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(body))
	name := ""
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			d := strings.TrimPrefix(line, "data: ")
			if d == "[DONE]" {
				names = append(names, "[DONE]")
				data = append(data, nil)
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("event data is not JSON: %q", d)
			}
			if name == "" {
				name, _ = m["object"].(string)
			}
			names = append(names, name)
			data = append(data, m)
			name = ""
		}
	}
	return names, data
}

// squeeze collapses runs of the same name: [a b b c] -> [a b c].
func squeeze(l []string) string {
	var out []string
	for _, n := range l {
		if len(out) == 0 || out[len(out)-1] != n {
			out = append(out, n)
		}
	}
	return strings.Join(out, " ")
}

func TestToolLoopEveryProtocol(t *testing.T) {
	const marker = "SBX-abc123"
	cases := []struct {
		name         string
		vendor       Vendor
		path         string
		first, final string // requests: offering the tool; carrying its result
		wantCall     string // a substring of the first answer
	}{
		{"anthropic", Anthropic, "/v1/messages",
			`{"model":"c","max_tokens":100,"messages":[{"role":"user","content":"go"}],"tools":[{"name":"read","input_schema":{"type":"object"}}]}`,
			`{"model":"c","max_tokens":100,"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"read","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"it says ` + marker + `"}]}]}`,
			`"type":"tool_use"`},
		{"openai chat", OpenAI, "/v1/chat/completions",
			`{"model":"g","messages":[{"role":"user","content":"go"}],"tools":[{"type":"function","function":{"name":"read"}}]}`,
			`{"model":"g","messages":[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"it says ` + marker + `"}]}`,
			`"finish_reason":"tool_calls"`},
		{"openai responses", OpenAI, "/v1/responses",
			`{"model":"g","input":"go","tools":[{"type":"function","name":"read","parameters":{}}]}`,
			`{"model":"g","input":[{"role":"user","content":"go"},{"type":"function_call","call_id":"c1","name":"read","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"it says ` + marker + `"}]}`,
			`"type":"function_call"`},
		{"gemini", Gemini, "/v1beta/models/gemini-3-pro:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"go"}]}],"tools":[{"functionDeclarations":[{"name":"read"}]}]}`,
			`{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"name":"read","args":{}},"thoughtSignature":"x"}]},{"role":"user","parts":[{"functionResponse":{"name":"read","response":{"output":"it says ` + marker + `"}}}]}]}`,
			`"functionCall"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(c.vendor, Options{Key: testKey, Tools: tools})
			defer s.Close()
			resp, body := post(t, s, c.path, testKey, c.first)
			if resp.StatusCode != 200 || !strings.Contains(body, c.wantCall) || !strings.Contains(body, "/tmp/m.txt") {
				t.Fatalf("first turn: %d %s", resp.StatusCode, body)
			}
			resp, body = post(t, s, c.path, testKey, c.final)
			if resp.StatusCode != 200 || !strings.Contains(body, "The tool said "+marker) {
				t.Fatalf("second turn: %d %s", resp.StatusCode, body)
			}
			if n := len(s.Requests()); n != 2 {
				t.Fatalf("%d requests recorded", n)
			}
		})
	}
}

func TestStreamSequences(t *testing.T) {
	cases := []struct {
		name   string
		vendor Vendor
		path   string
		body   string
		want   string // event names, runs collapsed
	}{
		{"anthropic text with adaptive thinking", Anthropic, "/v1/messages",
			`{"model":"c","max_tokens":100,"stream":true,"thinking":{"type":"adaptive"},"messages":[{"role":"user","content":"hi"}]}`,
			"message_start ping content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_stop message_delta message_stop"},
		{"anthropic tool_use", Anthropic, "/v1/messages",
			`{"model":"c","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"read","input_schema":{"type":"object"}}]}`,
			"message_start ping content_block_start content_block_delta content_block_stop message_delta message_stop"},
		{"chat with usage", OpenAI, "/v1/chat/completions",
			`{"model":"g","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
			"chat.completion.chunk [DONE]"},
		{"responses text", OpenAI, "/v1/responses",
			`{"model":"g","stream":true,"input":"hi","reasoning":{"effort":"low"}}`,
			"response.created response.in_progress response.output_item.added response.output_item.done response.output_item.added response.content_part.added response.output_text.delta response.output_text.done response.content_part.done response.output_item.done response.completed"},
		{"responses function_call", OpenAI, "/v1/responses",
			`{"model":"g","stream":true,"input":"hi","tools":[{"type":"function","name":"read"}]}`,
			"response.created response.in_progress response.output_item.added response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(c.vendor, Options{Key: testKey, Tools: tools})
			defer s.Close()
			resp, body := post(t, s, c.path, testKey, c.body)
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("%d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			names, data := events(t, body)
			if got := squeeze(names); got != c.want {
				t.Fatalf("events\n got %s\nwant %s", got, c.want)
			}
			if strings.HasPrefix(c.path, "/v1/responses") {
				for i, d := range data {
					if n, _ := d["sequence_number"].(float64); int(n) != i {
						t.Fatalf("event %d has sequence_number %v", i, d["sequence_number"])
					}
				}
			}
			if c.name == "chat with usage" {
				last := data[len(data)-2]
				if u, _ := last["usage"].(map[string]any); u == nil || u["total_tokens"] == nil {
					t.Fatalf("the chunk before [DONE] has no usage: %v", last)
				}
			}
		})
	}
}

func TestGeminiStreamForms(t *testing.T) {
	s := New(Gemini, Options{Key: testKey})
	defer s.Close()
	body := `{"contents":[{"parts":[{"text":"say SBX-gem123"}]}]}`
	resp, sse := post(t, s, "/v1beta/models/m:streamGenerateContent?alt=sse", testKey, body)
	if resp.StatusCode != 200 || !strings.Contains(sse, "\r\n\r\n") {
		t.Fatalf("alt=sse: %d %q", resp.StatusCode, sse)
	}
	_, data := events(t, sse)
	var text string
	for _, d := range data {
		c := d["candidates"].([]any)[0].(map[string]any)
		text += c["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"].(string)
	}
	last := data[len(data)-1]["candidates"].([]any)[0].(map[string]any)
	if text != "ack SBX-gem123" || last["finishReason"] != "STOP" || len(data) < 2 {
		t.Fatalf("sse chunks %d, text %q, last %v", len(data), text, last)
	}
	resp, arr := post(t, s, "/v1/models/m:streamGenerateContent", testKey, body)
	var chunks []map[string]any
	if resp.StatusCode != 200 || json.Unmarshal([]byte(arr), &chunks) != nil || len(chunks) != len(data) {
		t.Fatalf("JSON array form: %d %q", resp.StatusCode, arr)
	}
	u := chunks[len(chunks)-1]["usageMetadata"].(map[string]any)
	if u["candidatesTokenCount"] == nil || u["totalTokenCount"] == nil {
		t.Fatalf("last chunk's usageMetadata: %v", u)
	}
}

func TestGeminiStructuredOutput(t *testing.T) {
	s := New(Gemini, Options{Key: testKey, Tools: tools})
	defer s.Close()
	_, body := post(t, s, "/v1beta/models/m:generateContent?key="+testKey, "", `{"contents":[{"parts":[{"text":"rate"}]}],
		"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{"type":"OBJECT",
		"properties":{"score":{"type":"INTEGER"},"why":{"type":"STRING"}}}}}`)
	var r struct {
		Candidates []struct {
			Content struct{ Parts []struct{ Text string } }
		}
	}
	json.Unmarshal([]byte(body), &r)
	var v map[string]any
	if len(r.Candidates) == 0 || json.Unmarshal([]byte(r.Candidates[0].Content.Parts[0].Text), &v) != nil ||
		v["score"] != float64(1) || v["why"] != "ok" {
		t.Fatalf("answer %s", body)
	}
}

// TestRefusals: what the real APIs refuse, the fakes refuse, in the
// vendor's error shape.
func TestRefusals(t *testing.T) {
	cases := []struct {
		name   string
		vendor Vendor
		path   string
		key    string
		body   string
		status int
		want   string
	}{
		{"anthropic unknown field", Anthropic, "/v1/messages", testKey,
			`{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"stream_options":{}}`,
			400, `"message":"stream_options: Extra inputs are not permitted","type":"invalid_request_error"`},
		{"anthropic max_tokens missing", Anthropic, "/v1/messages", testKey,
			`{"model":"c","messages":[{"role":"user","content":"hi"}]}`, 400, "max_tokens: Field required"},
		{"anthropic orphan tool_result", Anthropic, "/v1/messages", testKey,
			`{"model":"c","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"r"}]}]}`,
			400, "unexpected `tool_use_id`"},
		{"anthropic unanswered tool_use", Anthropic, "/v1/messages", testKey,
			`{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{}}]},{"role":"user","content":"b"}]}`,
			400, "without `tool_result` blocks"},
		{"anthropic bad key", Anthropic, "/v1/messages", "wrong", `{}`, 401, `"type":"authentication_error"`},
		{"anthropic refusal word", Anthropic, "/v1/messages", testKey,
			`{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"` + RefuseWord + `"}]}`, 400, "refused by the fake upstream"},
		{"chat unknown field", OpenAI, "/v1/chat/completions", testKey,
			`{"model":"g","messages":[{"role":"user","content":"hi"}],"thinking":{}}`, 400, "Unrecognized request argument supplied: thinking"},
		{"chat stream_options without stream", OpenAI, "/v1/chat/completions", testKey,
			`{"model":"g","messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`, 400, "only allowed when 'stream' is enabled"},
		{"chat orphan tool message", OpenAI, "/v1/chat/completions", testKey,
			`{"model":"g","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"x","content":"r"}]}`, 400, "must be a response to a preceeding message"},
		{"chat bad key", OpenAI, "/v1/chat/completions", "wrong", `{}`, 401, `"code":"invalid_api_key"`},
		{"responses unknown field", OpenAI, "/v1/responses", testKey, `{"model":"g","input":"hi","messages":[]}`, 400, "Unknown parameter: 'messages'."},
		{"responses orphan output", OpenAI, "/v1/responses", testKey,
			`{"model":"g","input":[{"type":"function_call_output","call_id":"c9","output":"r"}]}`, 400, "No tool call found for function call output with call_id c9."},
		{"gemini unknown field", Gemini, "/v1beta/models/m:generateContent", testKey,
			`{"contents":[{"parts":[{"text":"hi"}]}],"messages":[]}`, 400, `Unknown name \"messages\"`},
		{"gemini unknown generationConfig field", Gemini, "/v1beta/models/m:generateContent", testKey,
			`{"contents":[{"parts":[{"text":"hi"}]}],"generation_config":{"max_tokens":5}}`, 400, "at 'generation_config'"},
		{"gemini orphan functionResponse", Gemini, "/v1beta/models/m:generateContent", testKey,
			`{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"f","response":{}}}]}]}`, 400, "function response turn comes immediately after a function call turn"},
		{"gemini-3 call without thought signature", Gemini, "/v1beta/models/gemini-3-pro:generateContent", testKey,
			`{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{}}}]}]}`,
			400, "missing a thought_signature"},
		{"gemini no key", Gemini, "/v1beta/models/m:generateContent", "", `{}`, 403, `"status":"PERMISSION_DENIED"`},
		{"gemini bad key", Gemini, "/v1beta/models/m:generateContent", "wrong", `{}`, 400, "API key not valid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(c.vendor, Options{Key: testKey})
			defer s.Close()
			resp, body := post(t, s, c.path, c.key, c.body)
			if resp.StatusCode != c.status || !strings.Contains(body, c.want) {
				t.Fatalf("%d %s\nwant %d with %s", resp.StatusCode, body, c.status, c.want)
			}
			if r := s.Requests(); len(r) != 1 || r[0].Status != c.status || !strings.Contains(string(r[0].Answer), c.want) {
				t.Fatalf("recorded %+v", r)
			}
		})
	}
}

func TestAnthropicNeedsVersionHeader(t *testing.T) {
	s := New(Anthropic, Options{Key: testKey})
	defer s.Close()
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/messages", strings.NewReader(`{}`))
	req.Header.Set("X-Api-Key", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "anthropic-version: header is required") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}
