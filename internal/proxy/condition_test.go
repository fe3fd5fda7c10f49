package proxy

import (
	"testing"

	"switchboard/internal/admit"
	"switchboard/internal/config"
	"switchboard/internal/provider"
	"switchboard/internal/translate"
)

func httpErr(status int, body string) *provider.Error {
	return &provider.Error{Kind: provider.KindHTTP, Status: status, Body: []byte(body)}
}

// Provider error bodies as the vendors send them, and what each means for
// cross-model fallbacks.
func TestFallbackConditionOfOneAttempt(t *testing.T) {
	geminiBlocked := string(translate.OpenAIError(400, "the prompt was blocked by the provider's safety filters (blockReason SAFETY)", "messages", "content_filter"))
	tests := []struct {
		name string
		err  *provider.Error
		want string
	}{
		{"OpenAI context_length_exceeded", httpErr(400, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`), config.FallbackContextWindow},
		{"vLLM maximum context length", httpErr(400, `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","code":400}`), config.FallbackContextWindow},
		{"Anthropic prompt is too long", httpErr(400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208656 tokens > 200000 maximum"}}`), config.FallbackContextWindow},
		{"Anthropic input and max_tokens over the limit", httpErr(400, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000\"}}"), config.FallbackContextWindow},
		{"Gemini input token count", httpErr(400, `{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`), config.FallbackContextWindow},
		{"Anthropic stream error event", &provider.Error{Kind: provider.KindBadResponse, Err: errStreamError,
			Body: []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 300000 tokens > 200000 maximum"}}`)}, config.FallbackContextWindow},
		{"OpenAI content_policy_violation", httpErr(400, `{"error":{"message":"Your request was rejected as a result of our safety system.","type":"invalid_request_error","code":"content_policy_violation"}}`), config.FallbackContentPolicy},
		{"Azure content_filter", httpErr(400, `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","code":"content_filter","innererror":{"code":"ResponsibleAIPolicyViolation"}}}`), config.FallbackContentPolicy},
		{"Anthropic output blocked", httpErr(400, `{"type":"error","error":{"type":"invalid_request_error","message":"Output blocked by content filtering policy"}}`), config.FallbackContentPolicy},
		{"Gemini prompt blocked (translated)", httpErr(400, geminiBlocked), config.FallbackContentPolicy},
		{"Gemini raw block feedback in an error", httpErr(400, `{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"}}`), config.FallbackContentPolicy},
		{"429", httpErr(429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`), config.FallbackRateLimit},
		{"Gemini 429 naming an input token quota is a rate limit", httpErr(429, `{"error":{"code":429,"message":"Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_input_token_count; input token count","status":"RESOURCE_EXHAUSTED"}}`), config.FallbackRateLimit},
		{"402 quota", httpErr(402, `{"error":{"message":"insufficient credits"}}`), config.FallbackRateLimit},
		{"500", httpErr(500, `{"error":{"message":"boom"}}`), config.FallbackError},
		{"timeout", &provider.Error{Kind: provider.KindTimeout, Err: errTTFT}, config.FallbackError},
		{"a 200 that is not JSON", &provider.Error{Kind: provider.KindBadResponse, Status: 200, Body: []byte("maximum context length")}, config.FallbackError},
		{"an invalid request", httpErr(400, `{"error":{"message":"messages: expected an array","type":"invalid_request_error"}}`), ""},
		{"a 5xx mentioning context is an error", httpErr(500, `{"error":{"message":"maximum context length handler crashed"}}`), config.FallbackError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &Failure{}
			f.note(tt.err, Reason(tt.err))
			if got := f.Condition(); got != tt.want {
				t.Errorf("condition %q, want %q", got, tt.want)
			}
		})
	}
}

// The whole loop's condition over several attempts and refusals.
func TestFallbackConditionOfALoop(t *testing.T) {
	rate := httpErr(429, `{}`)
	boom := httpErr(503, `{}`)
	invalid := httpErr(400, `{"error":{"message":"bad"}}`)
	ctx := httpErr(400, `{"error":{"code":"context_length_exceeded"}}`)
	tests := []struct {
		name     string
		errs     []*provider.Error
		refusals []*admit.Refusal
		refusal  *admit.Refusal // the loop's final refusal
		canceled bool
		want     string
	}{
		{"all rate limited", []*provider.Error{rate, rate}, nil, nil, false, config.FallbackRateLimit},
		{"rate limited and a provider's own bucket", []*provider.Error{rate}, []*admit.Refusal{{Status: 429, Scope: admit.ScopeProvider}}, nil, false, config.FallbackRateLimit},
		{"rate limited and a 503", []*provider.Error{rate, boom}, nil, nil, false, config.FallbackError},
		{"one context refusal among errors", []*provider.Error{boom, ctx}, nil, nil, false, config.FallbackContextWindow},
		{"invalid everywhere", []*provider.Error{invalid, invalid}, nil, nil, false, ""},
		{"invalid and a 503", []*provider.Error{invalid, boom}, nil, nil, false, config.FallbackError},
		{"unpriceable everywhere", nil, []*admit.Refusal{{Status: 400, Scope: admit.ScopeProvider}}, &admit.Refusal{Status: 400, Scope: admit.ScopeProvider}, false, config.FallbackError},
		{"the caller's own limit", []*provider.Error{boom}, nil, &admit.Refusal{Status: 429, Scope: admit.ScopeRequest}, false, ""},
		{"the client left", []*provider.Error{boom}, nil, nil, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &Failure{Refusal: tt.refusal, Canceled: tt.canceled}
			for _, e := range tt.errs {
				f.note(e, Reason(e))
			}
			for _, r := range tt.refusals {
				f.noteRefusal(r)
			}
			if got := f.Condition(); got != tt.want {
				t.Errorf("condition %q, want %q", got, tt.want)
			}
		})
	}
}

// A hedged race's failed sides keep what their attempts said: both sides
// rate limited make a rate_limit failure, not an unclassified one.
func TestHedgedSidesKeepTheirCondition(t *testing.T) {
	a, b := &side{}, &side{}
	a.f.note(httpErr(429, `{}`), "rate_limited")
	b.f.note(httpErr(429, `{}`), "rate_limited")
	f := &Failure{}
	(&race{}).fail(f, []outcome{{s: a}, {s: b}})
	if got := f.Condition(); got != config.FallbackRateLimit {
		t.Fatalf("condition %q, want rate_limit", got)
	}
	c := &side{}
	c.f.note(httpErr(400, `{"error":{"code":"context_length_exceeded"}}`), "client_error")
	(&race{}).fail(f, []outcome{{s: c}})
	if got := f.Condition(); got != config.FallbackContextWindow {
		t.Fatalf("condition %q, want context_window", got)
	}
}
