//go:build sdk

package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestSDKsSeeFallbackModel: an upstream (a real HTTP server) that
// refuses the prompt as too long for its context window; the official
// SDKs (OpenAI, Anthropic) get the fallback model's answer, unaware, and
// the headers say which model served.
func TestSDKsSeeFallbackModel(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`))
	})
	g := startGateway(t, `providers:
  up: {base_url: `+u.URL+`, api_key: k}
  sim: {type: mock, mock: {tokens: 4}}
models:
  - name: small
    providers: [{provider: up, model: small-8k}]
    fallbacks: {models: [large], on: [context_window]}
  - name: large
    providers: [{provider: sim, model: large-128k}]
`)
	client := openai.NewClient(option.WithBaseURL(g.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	var resp *http.Response
	c, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "small",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "large-128k" || len(c.Choices) == 0 || c.Choices[0].Message.Content == "" {
		t.Fatalf("completion = %+v", c)
	}
	if got := resp.Header.Get("X-Switchboard-Fallback-Model"); got != "large" {
		t.Errorf("X-Switchboard-Fallback-Model = %q, want large", got)
	}
	if got := resp.Header.Get("X-Switchboard-Model"); got != "small" {
		t.Errorf("X-Switchboard-Model = %q, want small (the client's)", got)
	}
	if len(u.bodies) != 1 {
		t.Errorf("upstream called %d times, want once", len(u.bodies))
	}

	// The Anthropic SDK on /v1/messages: the same fallback, in its shape.
	ac := anthropic.NewClient(aoption.WithBaseURL(g.URL), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
	var aresp *http.Response
	msg, err := ac.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "small", MaxTokens: 16,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}}, aoption.WithResponseInto(&aresp))
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Model) != "large-128k" || len(msg.Content) == 0 || aresp.Header.Get("X-Switchboard-Fallback-Model") != "large" {
		t.Fatalf("anthropic SDK: model %q, fallback header %q, content %+v", msg.Model, aresp.Header.Get("X-Switchboard-Fallback-Model"), msg.Content)
	}
}
