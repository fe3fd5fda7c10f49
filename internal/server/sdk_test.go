//go:build sdk

package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestOpenAISDK drives the gateway with the official Go SDK, unmodified.
func TestOpenAISDK(t *testing.T) {
	u := newUpstream(t, okChat)
	yaml := `providers:
  up:
    base_url: ` + u.URL + `
    api_key: k
  sim:
    type: mock
    mock: {tokens: 6, tokens_per_second: 1000}
models:
  - name: real
    providers: [{provider: up, model: upstream-model}]
  - name: simulated
    providers: [{provider: sim, model: sim-1}]
auth: {token: gw-key}
`
	g := startGateway(t, yaml)
	client := openai.NewClient(option.WithBaseURL(g.URL+"/v1"), option.WithAPIKey("gw-key"), option.WithMaxRetries(0))
	ctx := context.Background()

	t.Run("unary against an httptest upstream", func(t *testing.T) {
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "real",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if c.Choices[0].Message.Content != "hi" || c.Model != "upstream-model" || c.Usage.TotalTokens != 4 {
			t.Fatalf("completion = %+v", c)
		}
	})

	t.Run("streaming from the mock provider", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:    "simulated",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		})
		var text strings.Builder
		chunks := 0
		for stream.Next() {
			ch := stream.Current()
			if len(ch.Choices) > 0 {
				text.WriteString(ch.Choices[0].Delta.Content)
			}
			chunks++
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(text.String(), "Hello from sim!") || chunks < 6 {
			t.Fatalf("streamed %d chunks: %q", chunks, text.String())
		}
	})

	t.Run("models list", func(t *testing.T) {
		page, err := client.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
			if m.OwnedBy != "switchboard" {
				t.Errorf("owned_by = %q", m.OwnedBy)
			}
		}
		if strings.Join(ids, ",") != "real,simulated" {
			t.Fatalf("models = %v", ids)
		}
	})

	t.Run("unknown model is the SDK's 404 error", func(t *testing.T) {
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "missing",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("err = %v, want *openai.Error", err)
		}
		if apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" || apiErr.Param != "model" {
			t.Fatalf("status %d code %q param %q", apiErr.StatusCode, apiErr.Code, apiErr.Param)
		}
	})

	t.Run("bad key is the SDK's 401 error", func(t *testing.T) {
		bad := openai.NewClient(option.WithBaseURL(g.URL+"/v1"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
		_, err := bad.Models.List(ctx)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type != "authentication_error" {
			t.Fatalf("err = %v", err)
		}
	})
}
