package tracing

import (
	"net/url"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/attribute"

	"switchboard/internal/config"
)

// GenAI semantic conventions (semconv v1.41, status "development"): the
// Go semconv packages after v1.41 no longer carry them, so the keys are
// spelled here. gen_ai.provider.name replaced gen_ai.system in semconv
// 1.37; only the current name is sent (every attribute is marshalled with
// every span).
const (
	keyOperation     = attribute.Key("gen_ai.operation.name")
	keyProvider      = attribute.Key("gen_ai.provider.name")
	keyRequestModel  = attribute.Key("gen_ai.request.model")
	keyResponseModel = attribute.Key("gen_ai.response.model")
	keyInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	keyOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	keyFinish        = attribute.Key("gen_ai.response.finish_reasons")
	keyInputMessages = attribute.Key("gen_ai.input.messages")
	keyOutputMsgs    = attribute.Key("gen_ai.output.messages")
	keyServerAddress = attribute.Key("server.address")
	keyErrorType     = attribute.Key("error.type")
	keyHTTPStatus    = attribute.Key("http.response.status_code")
)

// Operation is gen_ai.operation.name for an OpenAI endpoint (its path
// under /v1).
func Operation(endpoint string) string {
	switch endpoint {
	case "completions":
		return "text_completion"
	case "embeddings":
		return "embeddings"
	}
	return "chat" // chat/completions, responses, messages
}

// knownHosts names the providers whose API host says who they are: an
// openai-type provider may be any OpenAI-compatible server.
var knownHosts = []struct{ suffix, name string }{
	{"api.openai.com", "openai"},
	{"openai.azure.com", "azure.ai.openai"},
	{"api.anthropic.com", "anthropic"},
	{"generativelanguage.googleapis.com", "gcp.gemini"},
	{"aiplatform.googleapis.com", "gcp.vertex_ai"},
	{"amazonaws.com", "aws.bedrock"},
	{"api.groq.com", "groq"},
	{"api.deepseek.com", "deepseek"},
	{"api.mistral.ai", "mistral_ai"},
	{"api.x.ai", "x_ai"},
	{"api.perplexity.ai", "perplexity"},
	{"api.cohere.com", "cohere"},
}

// providerInfo is what a provider's spans carry besides its config name.
type providerInfo struct {
	system string // gen_ai.provider.name
	host   string // server.address
	known  bool   // a known API host named system
}

// describe is gen_ai.provider.name and server.address of a configured
// provider: a known API host names it; else its type does ("openai" for
// any OpenAI-compatible server, as the OpenAI client's instrumentation
// would report it).
func describe(p *config.Provider) providerInfo {
	info := providerInfo{system: p.Type}
	switch p.Type {
	case config.TypeGemini:
		info.system = "gcp.gemini"
	case config.TypeAzure: // any of Azure's hosts, a private endpoint too
		info.system = "azure.ai.openai"
	case config.TypeBedrock:
		info.system = "aws.bedrock"
	case config.TypeVertex:
		info.system = "gcp.vertex_ai"
	case config.TypeMock:
		info.system = "switchboard.mock"
	}
	if u, err := url.Parse(p.BaseURL); err == nil && u.Host != "" {
		info.host = u.Hostname()
		for _, k := range knownHosts {
			if info.host == k.suffix || strings.HasSuffix(info.host, "."+k.suffix) {
				info.system, info.known = k.name, true
				break
			}
		}
	}
	return info
}

// answer adds a unary answer's GenAI attributes to out: the model that
// answered and the finish reasons. One pass over the top-level keys
// of the body, read in place (it is not copied; what is kept is).
func answer(out []attribute.KeyValue, endpoint string, body []byte) []attribute.KeyValue {
	var reasons []string
	reason := func(v gjson.Result) {
		if v.Type == gjson.String && len(reasons) < 16 {
			reasons = append(reasons, strings.Clone(v.Str))
		}
	}
	gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body))).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model":
			if v.Type == gjson.String {
				out = append(out, keyResponseModel.String(strings.Clone(v.Str)))
			}
		case "stop_reason":
			if endpoint == "messages" {
				reason(v)
			}
		case "status":
			if endpoint == "responses" {
				reason(v)
			}
		case "choices":
			v.ForEach(func(_, c gjson.Result) bool {
				reason(c.Get("finish_reason"))
				return true
			})
		}
		return true
	})
	if len(reasons) > 0 {
		out = append(out, keyFinish.StringSlice(reasons))
	}
	return out
}

// maxContent bounds a captured content attribute (bytes).
const maxContent = 64 << 10

// content is a JSON document for a content attribute, cut to maxContent.
func content(raw string) string {
	if len(raw) > maxContent {
		return raw[:maxContent] + "...(truncated)"
	}
	return raw
}

// inputOf is the request's messages (or prompt, input) as JSON text.
func inputOf(body []byte) string {
	r := gjson.ParseBytes(body)
	for _, k := range []string{"messages", "input", "prompt", "contents"} {
		if v := r.Get(k); v.Exists() {
			return content(v.Raw)
		}
	}
	return ""
}

// outputOf is a unary answer's choices (or content, output) as JSON text.
func outputOf(body []byte) string {
	r := gjson.ParseBytes(body)
	for _, k := range []string{"choices", "content", "output", "candidates"} {
		if v := r.Get(k); v.Exists() {
			return content(v.Raw)
		}
	}
	return ""
}
