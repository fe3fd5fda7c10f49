//go:build clients

package clients

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"switchboard/e2e/upstream"
)

// sdks are the SDK rows of the matrix.
var sdks = []sdkSpec{
	{name: "openai-go.chat", vendor: upstream.OpenAI, make: newOpenAIChat, atGateway: map[string]func(context.Context, sdkClient) error{
		"models": func(ctx context.Context, c sdkClient) error {
			page, err := c.(*openaiChat).c.Models.List(ctx)
			if err != nil {
				return err
			}
			var ids []string
			for _, m := range page.Data {
				ids = append(ids, m.ID)
			}
			return listed(ids)
		}}},
	{name: "openai-go.responses", vendor: upstream.OpenAI, make: newOpenAIResponses},
	{name: "anthropic-go", vendor: upstream.Anthropic, make: newAnthropic, perProvider: anthropicExtra, atGateway: anthropicGateway},
	{name: "genai-go", vendor: upstream.Gemini, make: newGenAI, perProvider: genaiExtra, atGateway: genaiGateway},
}

func openaiClient(base, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

func openaiError(err error) (apiErr, bool) {
	var e *openai.Error
	if !errors.As(err, &e) {
		return apiErr{}, false
	}
	msg := e.Message
	if msg == "" {
		msg = e.RawJSON()
	}
	return apiErr{status: e.StatusCode, native: e.Message != "", msg: msg}, true
}

// openaiChat is openai-go on /v1/chat/completions.
type openaiChat struct{ c openai.Client }

func newOpenAIChat(base, key string) (sdkClient, error) {
	return &openaiChat{openaiClient(base, key)}, nil
}

func (o *openaiChat) apiError(err error) (apiErr, bool) { return openaiError(err) }

// complete sends one chat request, unary or streamed (accumulated), and
// returns the answer's message.
func (o *openaiChat) complete(ctx context.Context, p openai.ChatCompletionNewParams, stream bool) (openai.ChatCompletionMessage, error) {
	if !stream {
		c, err := o.c.Chat.Completions.New(ctx, p)
		if err != nil {
			return openai.ChatCompletionMessage{}, err
		}
		if len(c.Choices) == 0 {
			return openai.ChatCompletionMessage{}, fmt.Errorf("no choices")
		}
		return c.Choices[0].Message, nil
	}
	s := o.c.Chat.Completions.NewStreaming(ctx, p)
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		return openai.ChatCompletionMessage{}, err
	}
	if len(acc.Choices) == 0 {
		return openai.ChatCompletionMessage{}, fmt.Errorf("the stream had no choices")
	}
	return acc.Choices[0].Message, nil
}

func (o *openaiChat) text(ctx context.Context, model, prompt string, stream bool) (string, error) {
	m, err := o.complete(ctx, openai.ChatCompletionNewParams{Model: model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}, stream)
	return m.Content, err
}

func (o *openaiChat) toolLoop(ctx context.Context, model string, stream bool, result string) (toolCall, string, error) {
	p := openai.ChatCompletionNewParams{Model: model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Get the marker.")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: sdkTool, Description: openai.String("Returns the marker."),
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"key": map[string]any{"type": "string"}}},
		})}}
	m, err := o.complete(ctx, p, stream)
	if err != nil {
		return toolCall{}, "", err
	}
	if len(m.ToolCalls) == 0 {
		return toolCall{}, "", fmt.Errorf("no tool call; the answer was %q", m.Content)
	}
	tc := m.ToolCalls[0]
	call := toolCall{tc.Function.Name, tc.Function.Arguments}
	p.Messages = append(p.Messages, m.ToParam(), openai.ToolMessage(result, tc.ID))
	m, err = o.complete(ctx, p, stream)
	return call, m.Content, err
}

// openaiResponses is openai-go on /v1/responses.
type openaiResponses struct{ c openai.Client }

func newOpenAIResponses(base, key string) (sdkClient, error) {
	return &openaiResponses{openaiClient(base, key)}, nil
}

func (o *openaiResponses) apiError(err error) (apiErr, bool) { return openaiError(err) }

// respond sends one Responses request, unary or streamed (the response
// of response.completed, after checking the deltas add up to its text).
func (o *openaiResponses) respond(ctx context.Context, p responses.ResponseNewParams, stream bool) (*responses.Response, error) {
	if !stream {
		return o.c.Responses.New(ctx, p)
	}
	s := o.c.Responses.NewStreaming(ctx, p)
	var deltas strings.Builder
	var done *responses.Response
	last := int64(-1)
	for s.Next() {
		ev := s.Current()
		if ev.SequenceNumber <= last {
			return nil, fmt.Errorf("event %s has sequence_number %d after %d", ev.Type, ev.SequenceNumber, last)
		}
		last = ev.SequenceNumber
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.completed":
			r := ev.Response
			done = &r
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if done == nil {
		return nil, fmt.Errorf("the stream ended without response.completed")
	}
	if deltas.String() != done.OutputText() {
		return nil, fmt.Errorf("the deltas say %q, response.completed %q", deltas.String(), done.OutputText())
	}
	return done, nil
}

func (o *openaiResponses) text(ctx context.Context, model, prompt string, stream bool) (string, error) {
	r, err := o.respond(ctx, responses.ResponseNewParams{Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}}, stream)
	if err != nil {
		return "", err
	}
	return r.OutputText(), nil
}

func (o *openaiResponses) toolLoop(ctx context.Context, model string, stream bool, result string) (toolCall, string, error) {
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("Get the marker.", responses.EasyInputMessageRoleUser)}
	p := responses.ResponseNewParams{Model: model, Store: openai.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: sdkTool,
			Strict:     openai.Bool(false),
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"key": map[string]any{"type": "string"}}}}}}}
	r, err := o.respond(ctx, p, stream)
	if err != nil {
		return toolCall{}, "", err
	}
	var fc *responses.ResponseFunctionToolCall
	for _, item := range r.Output {
		if item.Type == "function_call" {
			c := item.AsFunctionCall()
			fc = &c
			break
		}
	}
	if fc == nil {
		return toolCall{}, "", fmt.Errorf("no function_call item; the answer was %q", r.OutputText())
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput(result)
	out.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
	input = append(input, responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name), out)
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
	r, err = o.respond(ctx, p, stream)
	if err != nil {
		return toolCall{fc.Name, fc.Arguments}, "", err
	}
	return toolCall{fc.Name, fc.Arguments}, r.OutputText(), nil
}
