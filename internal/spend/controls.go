package spend

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/tidwall/gjson"
)

// knownControls are the top-level fields whose cost effect is known, over
// the OpenAI (chat, completions, responses, embeddings), Anthropic Messages
// and Gemini request shapes. Under a budget any other field is an unknown
// native control and the request is unpriceable: strict admission does not
// guess what a field might cost.
var knownControls = setOf(
	// content and shape
	"model", "messages", "prompt", "input", "instructions", "system", "systemInstruction", "system_instruction",
	"contents", "suffix", "echo",
	// output bounds and candidates (checked separately)
	"max_tokens", "max_completion_tokens", "max_output_tokens", "generationConfig", "generation_config", "n", "best_of",
	// sampling
	"temperature", "top_p", "top_k", "min_p", "stop", "stop_sequences", "presence_penalty", "frequency_penalty",
	"repetition_penalty", "logit_bias", "logprobs", "top_logprobs", "seed",
	// streaming, bookkeeping
	"stream", "stream_options", "user", "metadata", "store", "safety_identifier", "prompt_cache_key",
	"prompt_cache_retention", "labels", "safetySettings", "safety_settings", "background", "include", "truncation",
	// tools and formats (tools are checked separately)
	"tools", "tool_choice", "parallel_tool_calls", "functions", "function_call", "toolConfig", "tool_config",
	"response_format", "text", "max_tool_calls",
	// reasoning: bounded by the output limit
	"reasoning", "reasoning_effort", "thinking", "verbosity",
	// checked by value
	"service_tier", "modalities",
	// stored input: priced at the context ceiling
	"previous_response_id", "conversation", "cachedContent", "cached_content",
	// embeddings
	"encoding_format", "dimensions",
	// the clouds' native bodies: Anthropic's on Bedrock and Vertex AI,
	// Bedrock Converse's bounds and model fields (checked by value)
	"anthropic_version", "anthropic_beta", "inferenceConfig", "additionalModelRequestFields",
)

// knownModelFields are Converse's additionalModelRequestFields with a
// known cost effect (what the gateway's translation writes).
var knownModelFields = setOf("thinking", "top_k")

// explained are unpriceable fields with a specific reason.
var explained = map[string]string{
	"web_search_options": "provider-hosted tool (web_search_options)",
	"plugins":            "provider-hosted plugins",
	"container":          "provider-hosted code execution (container)",
	"mcp_servers":        "provider-hosted MCP servers",
	"models":             "variable routing across models (models)",
	"route":              "variable routing (route)",
	"provider":           "variable routing (provider preferences)",
	"transforms":         "provider-side prompt transforms",
	"audio":              "audio output",
	"prediction":         "predicted outputs (rejected prediction tokens are billed beyond the output limit)",
}

// knownGenConfig are the generationConfig fields with a known cost effect.
var knownGenConfig = setOf(
	"maxOutputTokens", "max_output_tokens", "candidateCount", "candidate_count", "temperature", "topP", "top_p",
	"topK", "top_k", "stopSequences", "stop_sequences", "presencePenalty", "presence_penalty", "frequencyPenalty",
	"frequency_penalty", "seed", "responseMimeType", "response_mime_type", "responseSchema", "response_schema",
	"responseJsonSchema", "response_json_schema", "thinkingConfig", "thinking_config", "responseLogprobs",
	"response_logprobs", "logprobs", "responseModalities", "response_modalities",
)

// serviceTiers are the values priced at (or below) the standard rates.
var serviceTiers = setOf("auto", "default", "flex", "standard_only")

// clientToolTypes are tool types executed by the client (no provider fee);
// clientToolPrefixes cover Anthropic's versioned client tools.
var (
	clientToolTypes    = setOf("function", "custom", "local_shell")
	clientToolPrefixes = []string{"bash_", "text_editor_", "computer_", "memory_"}
	// Gemini tool objects: functionDeclarations is the client's; the rest
	// are provider-hosted.
	geminiClientTools = setOf("functionDeclarations", "function_declarations")
)

func setOf(xs ...string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// controlsReason returns why the body's cost cannot be bounded from its
// fields, or "".
func controlsReason(body []byte) string {
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return "the request body is not a JSON object"
	}
	reason := ""
	root.ForEach(func(k, v gjson.Result) bool {
		key := k.String()
		switch {
		case explained[key] != "":
			reason = explained[key]
		case !knownControls[key]:
			reason = fmt.Sprintf("unknown native control %q", key)
		case key == "service_tier" && v.Type != gjson.Null && !serviceTiers[v.String()]:
			reason = fmt.Sprintf("service_tier %q is priced above the catalog's standard rates", v.String())
		case key == "modalities" && !textOnly(v):
			reason = "non-text output modalities"
		case key == "tools":
			reason = toolsReason(v)
		case key == "additionalModelRequestFields":
			v.ForEach(func(mk, _ gjson.Result) bool {
				if !knownModelFields[mk.String()] {
					reason = fmt.Sprintf("unknown native control %q", key+"."+mk.String())
				}
				return reason == ""
			})
		case key == "generationConfig" || key == "generation_config":
			v.ForEach(func(gk, gv gjson.Result) bool {
				switch n := gk.String(); {
				case !knownGenConfig[n]:
					reason = fmt.Sprintf("unknown native control %q", key+"."+n)
				case (n == "responseModalities" || n == "response_modalities") && !textOnly(gv):
					reason = "non-text output modalities"
				}
				return reason == ""
			})
		}
		return reason == ""
	})
	return reason
}

func textOnly(v gjson.Result) bool {
	if v.Type == gjson.Null {
		return true
	}
	ok := v.IsArray()
	v.ForEach(func(_, m gjson.Result) bool {
		ok = ok && strings.EqualFold(m.String(), "text")
		return ok
	})
	return ok
}

// toolsReason refuses provider-hosted tools (web search, code execution,
// file search, MCP ...): their fees are outside the token catalog.
func toolsReason(tools gjson.Result) string {
	if tools.Type == gjson.Null {
		return ""
	}
	if !tools.IsArray() {
		return "tools is not a list"
	}
	reason := ""
	tools.ForEach(func(_, t gjson.Result) bool {
		if typ := t.Get("type"); typ.Exists() {
			name := typ.String()
			if clientToolTypes[name] {
				return true
			}
			for _, p := range clientToolPrefixes {
				if strings.HasPrefix(name, p) {
					return true
				}
			}
			reason = fmt.Sprintf("provider-hosted tool %q", name)
			return false
		}
		if t.Get("name").Exists() || t.Get("function").Exists() {
			return true // an Anthropic or legacy client tool
		}
		t.ForEach(func(k, _ gjson.Result) bool {
			if !geminiClientTools[k.String()] {
				reason = fmt.Sprintf("provider-hosted tool %q", k.String())
			}
			return reason == ""
		})
		return reason == ""
	})
	return reason
}

// mediaMarkers are quoted JSON tokens of content parts whose token count
// the bytes do not bound (images, audio, files). Inside a JSON string a
// quote is escaped, so these only match real keys or whole values.
var mediaMarkers = [][]byte{
	[]byte(`"image_url"`), []byte(`"input_image"`), []byte(`"input_audio"`), []byte(`"input_file"`),
	[]byte(`"inline_data"`), []byte(`"inlineData"`), []byte(`"file_data"`), []byte(`"fileData"`), []byte(`"file_id"`),
	[]byte(`"type":"image"`), []byte(`"type":"document"`), []byte(`"type":"file"`), []byte(`"type":"audio"`),
	[]byte(`"type":"container_upload"`),
}

// hasMarker reports whether any of mediaMarkers occurs in b. Every marker
// starts with a quote, which a chat body has dozens of: one pass over the
// quotes, trying the markers at each, costs a fourteenth of searching for
// each marker in turn.
func hasMarker(b []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return false
		}
		i += j
		// Every marker's second byte is one of these.
		if i+1 < len(b) && (b[i+1] == 'i' || b[i+1] == 'f' || b[i+1] == 't') {
			for _, m := range mediaMarkers {
				if bytes.HasPrefix(b[i:], m) {
					return true
				}
			}
		}
		i++
	}
}

// storedInput are fields that pull input the body does not contain.
var storedInput = [...]string{"previous_response_id", "conversation", "cachedContent", "cached_content"}

// inputShape reports whether the (compact) body carries media, or refers to
// input stored at the provider; both bound input by the context ceiling.
// t is the body's top level (readTop).
func inputShape(compact []byte, t *topLevel) (media, stored bool) {
	media = hasMarker(compact)
	for _, r := range t.stored {
		if present(r) {
			stored = true
		}
	}
	// A Responses prompt template (an object) is stored input too.
	if t.counted[promptField].IsObject() {
		stored = true
	}
	return media, stored
}

func present(r gjson.Result) bool { return r.Exists() && r.Type != gjson.Null }

var (
	cacheControl = []byte(`"cache_control"`)
	longTTL      = regexp.MustCompile(`"cache_control":\{[^{}]*"ttl":"1h"`)
)

// cacheWrites reports whether the body asks for cache writes (Anthropic
// cache_control), and whether any uses the 1-hour TTL (2× input).
func cacheWrites(compact []byte) (writes, hour bool) {
	if !bytes.Contains(compact, cacheControl) {
		return false, false
	}
	return true, longTTL.Match(compact)
}
