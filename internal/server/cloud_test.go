package server

import (
	"math"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/tidwall/gjson"

	"switchboard/internal/provider/cloud/cloudtest"
)

var bedrockCreds = aws.Credentials{AccessKeyID: "AKIASERVERTEST", SecretAccessKey: "server-test-secret", SessionToken: "server-test-session"}

// clouds is a gateway in front of the three stand-ins, one model per
// cloud and protocol, each priced so that its cost can be checked.
type clouds struct {
	g                     *gateway
	azure, bedrock, vertx *cloudFake
	google                *cloudtest.Google
}

// cloudModels: client model -> the cloud's usage and prices (input,
// output USD per million).
var cloudModels = map[string]struct {
	usage  [2]int64
	prices [2]float64
	says   string
}{
	"az-chat":   {azureUsage, [2]float64{2.5, 10}, "from azure"},
	"br-claude": {bedrockUsage, [2]float64{3, 15}, "from bedrock"},
	"br-nova":   {bedrockUsage, [2]float64{0.8, 3.2}, "from bedrock"},
	"vx-gemini": {vertexUsage, [2]float64{0.3, 2.5}, "from gemini"},
	"vx-claude": {vertexUsage, [2]float64{3.3, 16.5}, "from vertex claude"},
}

func startClouds(t *testing.T) *clouds {
	cloudtest.AWSEnv(t, bedrockCreds)
	c := &clouds{google: cloudtest.NewGoogle(t)}
	c.azure = newAzure(t, "az-resource-key")
	c.bedrock = newBedrock(t, func() []aws.Credentials { return []aws.Credentials{bedrockCreds} }, "")
	c.vertx = newVertex(t, c.google)
	sa := c.google.ServiceAccountFile(t, t.TempDir())
	c.g = startGateway(t, `
providers:
  az: {type: azure, base_url: "`+c.azure.URL+`", api_version: 2024-10-21, api_key: az-resource-key}
  br: {type: bedrock, region: us-east-1, base_url: "`+c.bedrock.URL+`"}
  vx: {type: vertex, project: test-project, location: us-east5, base_url: "`+c.vertx.URL+`", credentials_file: "`+sa+`"}
models:
  - {name: az-chat, providers: [{provider: az, model: gpt4o}]}
  - {name: br-claude, providers: [{provider: br, model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}]}
  - {name: br-nova, providers: [{provider: br, model: "amazon.nova-pro-v1:0"}]}
  - {name: vx-gemini, providers: [{provider: vx, model: gemini-2.5-flash}]}
  - {name: vx-claude, providers: [{provider: vx, model: "claude-sonnet-4-5@20250929"}]}
pricing:
  az: {gpt4o: {input: 2.5, output: 10}}
  br: {"us.anthropic.claude-sonnet-4-5-20250929-v1:0": {input: 3, output: 15}, "amazon.nova-pro-v1:0": {input: 0.8, output: 3.2}}
  vx: {gemini-2.5-flash: {input: 0.3, output: 2.5}, "claude-sonnet-4-5@20250929": {input: 3.3, output: 16.5}}
retries: {max_attempts: 2, max_rounds: 1, backoff_base: 0.01, max_backoff: 0.05}
auth:
  keys:
    k-az-chat: {tenant: t-az-chat, budget_usd: 10}
    k-br-claude: {tenant: t-br-claude, budget_usd: 10}
    k-br-nova: {tenant: t-br-nova, budget_usd: 10}
    k-vx-gemini: {tenant: t-vx-gemini, budget_usd: 10}
    k-vx-claude: {tenant: t-vx-claude, budget_usd: 10}
`)
	t.Cleanup(func() {
		for name, f := range map[string]*cloudFake{"azure": c.azure, "bedrock": c.bedrock, "vertex": c.vertx} {
			if p := f.problems(); len(p) > 0 {
				t.Errorf("%s saw bad requests: %q", name, p)
			}
		}
	})
	return c
}

// wantCost is the cost of usage u at prices p, in USD.
func wantCost(u [2]int64, p [2]float64) float64 {
	return (float64(u[0])*p[0] + float64(u[1])*p[1]) / 1e6
}

func costIs(got gjson.Result, want float64) bool {
	return got.Type == gjson.Number && math.Abs(got.Float()-want) < 1e-9
}

const weatherTool = `"tools":[{"type":"function","function":{"name":"get_weather","description":"Current weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`

// Chat completions through every cloud, unary and streamed, with tools:
// the answer, the usage and the cost come from the cloud's own answer.
func TestCloudChat(t *testing.T) {
	c := startClouds(t)
	for model, m := range cloudModels {
		t.Run(model, func(t *testing.T) {
			key := "k-" + model
			msgs := `"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]`
			a := c.g.post("/v1/chat/completions", `{"model":"`+model+`","max_tokens":64,`+msgs+`}`, "x-api-key", key)
			if a.Status != 200 || !strings.Contains(gjson.Get(a.Body, "choices.0.message.content").String(), m.says) {
				t.Fatalf("unary: %d %s", a.Status, a.Body)
			}
			if gjson.Get(a.Body, "usage.prompt_tokens").Int() != m.usage[0] || gjson.Get(a.Body, "usage.completion_tokens").Int() != m.usage[1] ||
				!costIs(gjson.Get(a.Body, "usage.cost_usd"), wantCost(m.usage, m.prices)) {
				t.Fatalf("unary usage %s, want %v at %v", gjson.Get(a.Body, "usage").Raw, m.usage, m.prices)
			}

			// A stream whose client asked for usage ends with one usage
			// chunk: the cloud's numbers and their cost.
			evs := cloudStream(t, c.g, key, "/v1/chat/completions", `{"model":"`+model+`","max_tokens":64,"stream":true,"stream_options":{"include_usage":true},`+msgs+`}`)
			text := ""
			for _, e := range evs {
				text += gjson.Get(e, "choices.0.delta.content").String()
			}
			u := usageChunks(evs)
			if !strings.Contains(text, m.says) || len(u) != 1 || evs[len(evs)-1] != "[DONE]" {
				t.Fatalf("stream: text %q, usage chunks %q", text, u)
			}
			if gjson.Get(u[0], "usage.prompt_tokens").Int() != m.usage[0] || gjson.Get(u[0], "usage.completion_tokens").Int() != m.usage[1] ||
				!costIs(gjson.Get(u[0], "usage.cost_usd"), wantCost(m.usage, m.prices)) {
				t.Fatalf("stream usage %s", u[0])
			}
			// One that did not ask gets no usage chunk.
			evs = cloudStream(t, c.g, key, "/v1/chat/completions", `{"model":"`+model+`","max_tokens":64,"stream":true,`+msgs+`}`)
			if u := usageChunks(evs); len(u) != 0 {
				t.Fatalf("usage chunk the client did not ask for: %q", u)
			}

			// Tools, in each cloud's own shape: the call comes back as
			// OpenAI tool_calls, unary and streamed.
			a = c.g.post("/v1/chat/completions", `{"model":"`+model+`","max_tokens":64,`+msgs+`,`+weatherTool+`}`, "x-api-key", key)
			call := gjson.Get(a.Body, "choices.0.message.tool_calls.0")
			if a.Status != 200 || call.Get("function.name").String() != "get_weather" ||
				gjson.Get(call.Get("function.arguments").String(), "city").String() != "Paris" ||
				gjson.Get(a.Body, "choices.0.finish_reason").String() != "tool_calls" {
				t.Fatalf("tools: %d %s", a.Status, a.Body)
			}
			evs = cloudStream(t, c.g, key, "/v1/chat/completions", `{"model":"`+model+`","max_tokens":64,"stream":true,`+msgs+`,`+weatherTool+`}`)
			name, args := "", ""
			for _, e := range evs {
				name += gjson.Get(e, "choices.0.delta.tool_calls.0.function.name").String()
				args += gjson.Get(e, "choices.0.delta.tool_calls.0.function.arguments").String()
			}
			if name != "get_weather" || gjson.Get(args, "city").String() != "Paris" {
				t.Fatalf("streamed tool call %q(%q): %q", name, args, evs)
			}
		})
	}
}

// Anthropic Messages clients through every cloud: Claude on Bedrock and
// Vertex AI gets the client's body untranslated (its native fields kept),
// the others the translated request; usage and cost from the cloud.
func TestCloudMessages(t *testing.T) {
	c := startClouds(t)
	native := map[string]*cloudFake{"br-claude": c.bedrock, "vx-claude": c.vertx}
	for model, m := range cloudModels {
		t.Run(model, func(t *testing.T) {
			key := "k-" + model
			extra := `"metadata":{"user_id":"u-1"}`
			if native[model] != nil {
				extra += `,"top_k":5` // Anthropic's own: kept when untranslated
			}
			body := `{"model":"` + model + `","max_tokens":64,` + extra + `,"messages":[{"role":"user","content":"hi"}]}`
			a := c.g.post("/v1/messages", body, "anthropic-version", "2023-06-01", "x-api-key", key)
			if a.Status != 200 || gjson.Get(a.Body, "type").String() != "message" || !strings.Contains(gjson.Get(a.Body, "content.0.text").String(), m.says) {
				t.Fatalf("%d %s", a.Status, a.Body)
			}
			if gjson.Get(a.Body, "usage.input_tokens").Int() != m.usage[0] || gjson.Get(a.Body, "usage.output_tokens").Int() != m.usage[1] {
				t.Fatalf("usage %s", gjson.Get(a.Body, "usage").Raw)
			}
			// The key's spend is the cloud's usage at the model's prices.
			u := c.g.get("/v1/usage", "x-api-key", key)
			if got, want := gjson.Get(u.Body, "spend.settled_nano_usd").Int(), int64(math.Round(wantCost(m.usage, m.prices)*1e9)); got < want-1 || got > want+1 {
				t.Fatalf("settled %d nano-USD, want %d: %s", got, want, u.Body)
			}
			if f := native[model]; f != nil {
				sent := f.last(t)
				if !strings.Contains(sent.path, "invoke") && !strings.Contains(sent.path, "rawPredict") {
					t.Fatalf("Claude went to %s, not the native operation", sent.path)
				}
				if gjson.GetBytes(sent.body, "top_k").Int() != 5 || gjson.GetBytes(sent.body, "metadata.user_id").String() != "u-1" {
					t.Fatalf("native body lost fields: %s", sent.body)
				}
			}
			// Streamed: Anthropic's events, the cloud's text.
			evs := cloudStream(t, c.g, key, "/v1/messages", `{"model":"`+model+`","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			text, stop := "", false
			for _, e := range evs {
				text += gjson.Get(e, "delta.text").String()
				stop = stop || gjson.Get(e, "type").String() == "message_stop"
			}
			if !strings.Contains(text, m.says) || !stop {
				t.Fatalf("stream text %q, stop %v: %q", text, stop, evs)
			}
		})
	}
}
