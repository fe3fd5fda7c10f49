//go:build sdk

package server

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// TestSDKsReadAStreamHeldToItsBound: an upstream that ignores max_tokens
// is ended by the gateway at the reservation's bound; the official SDKs,
// unmodified, read each ending as the model's own stop for length: the
// OpenAI SDK's chat accumulator gets finish_reason "length", its Responses
// stream a response.incomplete for max_output_tokens, and the Anthropic
// SDK's message accumulator stop_reason "max_tokens" (relayed natively
// and translated), each with no error and at most the 5 tokens asked for.
func TestSDKsReadAStreamHeldToItsBound(t *testing.T) {
	u := newWire(t)
	g := moneyGateway(t, "memory", wireYAML(u, "runaway", "auth:\n  keys:\n    k: {tenant: acme, budget_usd: 10}\n"))
	ctx := context.Background()
	oc := openai.NewClient(option.WithBaseURL(g.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))

	s := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "m", MaxTokens: openai.Int(5),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for s.Next() {
		acc.AddChunk(s.Current())
		if len(s.Current().Choices) > 0 && s.Current().Choices[0].Delta.Content != "" {
			chunks++
		}
	}
	if err := s.Err(); err != nil || len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "length" || chunks > 5 {
		t.Fatalf("chat: err %v, %d content chunks, accumulated %+v", err, chunks, acc.Choices)
	}

	rs := oc.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "m", MaxOutputTokens: openai.Int(5),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var incomplete *responses.ResponseIncompleteEvent
	deltas := 0
	for rs.Next() {
		switch e := rs.Current().AsAny().(type) {
		case responses.ResponseTextDeltaEvent:
			deltas++
		case responses.ResponseIncompleteEvent:
			incomplete = &e
		}
	}
	if err := rs.Err(); err != nil || incomplete == nil || incomplete.Response.IncompleteDetails.Reason != "max_output_tokens" || deltas > 5 {
		t.Fatalf("responses: err %v, %d deltas, incomplete %+v", err, deltas, incomplete)
	}

	ac := anthropic.NewClient(aoption.WithBaseURL(g.URL), aoption.WithAPIKey("k"), aoption.WithMaxRetries(0))
	for _, model := range []string{"a", "m"} { // native, translated
		ms := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 5,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		msg := &anthropic.Message{}
		for ms.Next() {
			if err := msg.Accumulate(ms.Current()); err != nil {
				t.Fatalf("messages %s: accumulate: %v", model, err)
			}
		}
		if err := ms.Err(); err != nil || msg.StopReason != anthropic.StopReasonMaxTokens || len(msg.Content) != 1 {
			t.Fatalf("messages %s: err %v, message %+v", model, err, msg)
		}
	}
}
