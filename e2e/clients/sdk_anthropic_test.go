//go:build clients

package clients

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// anthropicSDK is anthropic-sdk-go on /v1/messages.
type anthropicSDK struct{ c anthropic.Client }

func newAnthropic(base, key string) (sdkClient, error) {
	return &anthropicSDK{anthropic.NewClient(option.WithBaseURL(base), option.WithAPIKey(key), option.WithMaxRetries(0))}, nil
}

func (a *anthropicSDK) apiError(err error) (apiErr, bool) {
	var e *anthropic.Error
	if !errors.As(err, &e) {
		return apiErr{}, false
	}
	msg := e.Message
	if msg == "" {
		msg = e.RawJSON()
	}
	return apiErr{status: e.StatusCode, native: e.Type() != "" && e.Message != "", msg: msg}, true
}

// send posts one Messages request, unary or streamed (accumulated from
// the events).
func (a *anthropicSDK) send(ctx context.Context, p anthropic.MessageNewParams, stream bool) (*anthropic.Message, error) {
	if !stream {
		return a.c.Messages.New(ctx, p)
	}
	s := a.c.Messages.NewStreaming(ctx, p)
	msg := anthropic.Message{}
	for s.Next() {
		if err := msg.Accumulate(s.Current()); err != nil {
			return nil, err
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if msg.StopReason == "" {
		return nil, fmt.Errorf("the stream ended without a stop reason (no message_delta)")
	}
	return &msg, nil
}

func messageText(m *anthropic.Message) string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

func (a *anthropicSDK) text(ctx context.Context, model, prompt string, stream bool) (string, error) {
	m, err := a.send(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}}, stream)
	if err != nil {
		return "", err
	}
	return messageText(m), nil
}

func (a *anthropicSDK) toolLoop(ctx context.Context, model string, stream bool, result string) (toolCall, string, error) {
	p := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Get the marker."))},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: sdkTool,
			Description: anthropic.String("Returns the marker."),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"key": map[string]any{"type": "string"}}}}}}}
	m, err := a.send(ctx, p, stream)
	if err != nil {
		return toolCall{}, "", err
	}
	var call toolCall
	var id string
	for _, c := range m.Content {
		if c.Type == "tool_use" {
			call, id = toolCall{c.Name, string(c.Input)}, c.ID
			break
		}
	}
	if id == "" {
		return toolCall{}, "", fmt.Errorf("no tool_use block (stop reason %s); the answer was %q", m.StopReason, messageText(m))
	}
	if m.StopReason != anthropic.StopReasonToolUse {
		return call, "", fmt.Errorf("stop reason %q with a tool_use block, want tool_use", m.StopReason)
	}
	p.Messages = append(p.Messages, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(id, result, false)))
	m, err = a.send(ctx, p, stream)
	if err != nil {
		return call, "", err
	}
	return call, messageText(m), nil
}

// anthropicExtra: /v1/messages/count_tokens, per provider type.
var anthropicExtra = map[string]func(context.Context, sdkClient) error{
	"count-tokens": func(ctx context.Context, c sdkClient) error {
		n, err := c.(*anthropicSDK).c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
			Model:    anthropic.Model(sdkModel),
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("How many tokens is this?"))}})
		if err != nil {
			return err
		}
		if n.InputTokens <= 0 {
			return fmt.Errorf("input_tokens %d", n.InputTokens)
		}
		return nil
	},
}

// anthropicGateway: GET /v1/models as the Anthropic SDK reads it.
var anthropicGateway = map[string]func(context.Context, sdkClient) error{
	"models": func(ctx context.Context, c sdkClient) error {
		page, err := c.(*anthropicSDK).c.Models.List(ctx, anthropic.ModelListParams{})
		if err != nil {
			return err
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		return listed(ids)
	},
}
