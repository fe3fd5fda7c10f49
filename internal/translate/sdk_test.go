//go:build sdk

package translate

// The official SDKs must read what the translators write, unmodified:
// these tests serve translated bytes to the Anthropic and OpenAI Go SDKs.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	asdk "github.com/anthropics/anthropic-sdk-go/v2"
	aopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	osdk "github.com/openai/openai-go/v3"
	oopt "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

func serve(t *testing.T, status int, ct string, body []byte) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func anthropicClient(url string) *asdk.Client {
	c := asdk.NewClient(aopt.WithBaseURL(url), aopt.WithAPIKey("k"), aopt.WithMaxRetries(0))
	return &c
}

var anthropicParams = asdk.MessageNewParams{Model: "claude-client-model", MaxTokens: 100,
	Messages: []asdk.MessageParam{asdk.NewUserMessage(asdk.NewTextBlock("hi"))}}

func TestAnthropicSDKReadsMessagesStream(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "anthropic_openai", "stream_tool_calls.in.sse"))
	if err != nil {
		t.Fatal(err)
	}
	out := clientStreamSSE(NewMessagesStream("claude-client-model"), in)
	stream := anthropicClient(serve(t, 200, "text/event-stream", out)).Messages.NewStreaming(context.Background(), anthropicParams)
	var msg asdk.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 4 || msg.Content[1].Text != "Checking." || msg.Content[0].Thinking != "Two cities." {
		t.Fatalf("content %+v", msg.Content)
	}
	tu := msg.Content[3].AsToolUse()
	if tu.ID != "call_B" || tu.Name != "get_weather" || string(tu.Input) != `{"city":"Rome"}` {
		t.Errorf("tool use %+v input %s", tu, tu.Input)
	}
	if msg.StopReason != asdk.StopReasonToolUse || msg.Usage.OutputTokens != 30 || msg.Usage.CacheReadInputTokens != 64 {
		t.Errorf("stop %q usage %+v", msg.StopReason, msg.Usage)
	}
}

func TestAnthropicSDKReadsMessageAndError(t *testing.T) {
	in, _ := os.ReadFile(filepath.Join("testdata", "anthropic_openai", "resp_tool_calls.in.json"))
	body, _, err := ChatToMessages(in, "claude-client-model")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := anthropicClient(serve(t, 200, "application/json", body)).Messages.New(context.Background(), anthropicParams)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != asdk.StopReasonToolUse || len(msg.Content) != 3 || msg.Content[2].AsToolUse().Name != "get_weather" {
		t.Errorf("message %+v", msg)
	}

	eb := ErrorToAnthropic(429, OpenAIError(429, "slow down", "", "rate_limit_exceeded"))
	_, err = anthropicClient(serve(t, 429, "application/json", eb)).Messages.New(context.Background(), anthropicParams)
	var ae *asdk.Error
	if !errors.As(err, &ae) || ae.StatusCode != 429 || ae.Type() != "rate_limit_error" {
		t.Errorf("error %v", err)
	}
}

func openaiClient(url string) *osdk.Client {
	c := osdk.NewClient(oopt.WithBaseURL(url), oopt.WithAPIKey("k"), oopt.WithMaxRetries(0))
	return &c
}

var openaiParams = osdk.ChatCompletionNewParams{Model: "m", Messages: []osdk.ChatCompletionMessageParamUnion{osdk.UserMessage("hi")}}

func TestOpenAISDKReadsTranslatedStreams(t *testing.T) {
	for _, c := range []struct{ pair, file string }{
		{"openai_anthropic", "stream_tool_use"},
		{"openai_gemini", "stream_function_calls"},
	} {
		t.Run(c.pair, func(t *testing.T) {
			dir := filepath.Join("testdata", c.pair)
			in, _ := os.ReadFile(filepath.Join(dir, c.file+".in.sse"))
			req, _ := os.ReadFile(filepath.Join(dir, c.file+".req.json"))
			out, err := pairs[c.pair].stream(req, in)
			if err != nil {
				t.Fatal(err)
			}
			stream := openaiClient(serve(t, 200, "text/event-stream", out)).Chat.Completions.NewStreaming(context.Background(), openaiParams)
			var acc osdk.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			m := acc.Choices[0].Message
			if len(m.ToolCalls) != 2 || acc.Choices[0].FinishReason != "tool_calls" || acc.Usage.TotalTokens == 0 {
				t.Fatalf("accumulated %+v usage %+v", acc.Choices[0], acc.Usage)
			}
			for _, tc := range m.ToolCalls {
				if tc.Function.Name != "get_weather" || !json.Valid([]byte(tc.Function.Arguments)) {
					t.Errorf("tool call %+v", tc)
				}
			}
		})
	}
}

func TestOpenAISDKReadsTranslatedUnaryAndErrors(t *testing.T) {
	in, _ := os.ReadFile(filepath.Join("testdata", "openai_anthropic", "resp_tool_use.in.json"))
	body, _, err := mustAnthropic([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)).Response(in)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := openaiClient(serve(t, 200, "application/json", body)).Chat.Completions.New(context.Background(), openaiParams)
	if err != nil {
		t.Fatal(err)
	}
	if len(cc.Choices[0].Message.ToolCalls) != 2 || cc.Usage.CompletionTokensDetails.ReasoningTokens != 20 {
		t.Errorf("completion %+v", cc)
	}
	for _, status := range []int{400, 401, 429, 529} {
		eb := AnthropicErrorToOpenAI(status, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
		_, err := openaiClient(serve(t, status, "application/json", eb)).Chat.Completions.New(context.Background(), openaiParams)
		var oe *osdk.Error
		if !errors.As(err, &oe) || oe.StatusCode != status || oe.Message != "Overloaded" {
			t.Errorf("%d: %v", status, err)
		}
	}
}

// TestOpenAISDKSeesMidStreamError: an upstream error inside a stream
// reaches OpenAI clients as an error, not as a clean end.
func TestOpenAISDKSeesMidStreamError(t *testing.T) {
	in, _ := os.ReadFile(filepath.Join("testdata", "openai_anthropic", "stream_error_mid.in.sse"))
	out, _ := io.ReadAll(NewReader(io.NopCloser(bytes.NewReader(in)), mustAnthropic(defaultStreamReq).Stream()))
	stream := openaiClient(serve(t, 200, "text/event-stream", out)).Chat.Completions.NewStreaming(context.Background(), openaiParams)
	for stream.Next() {
	}
	if stream.Err() == nil {
		t.Error("mid-stream error not reported")
	}
}

var responsesParams = responses.ResponseNewParams{Model: "gpt-client-model",
	Input: responses.ResponseNewParamsInputUnion{OfString: osdk.String("hi")}}

// TestOpenAISDKReadsResponsesStream: the Responses event sequence built
// from a translated stream is read by the SDK event by event, calls and
// usage included.
func TestOpenAISDKReadsResponsesStream(t *testing.T) {
	dir := filepath.Join("testdata", "responses_openai")
	in, _ := os.ReadFile(filepath.Join(dir, "stream_custom_tool.in.sse"))
	req, _ := os.ReadFile(filepath.Join(dir, "stream_custom_tool.req.json"))
	out := clientStreamSSE(mustFromResponses(req).Stream(""), in)
	stream := openaiClient(serve(t, 200, "text/event-stream", out)).Responses.NewStreaming(context.Background(), responsesParams)
	var text strings.Builder
	var done *responses.Response
	seq := int64(0)
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != seq {
			t.Errorf("%s: sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq++
		switch e := ev.AsAny().(type) {
		case responses.ResponseTextDeltaEvent:
			text.WriteString(e.Delta)
		case responses.ResponseCompletedEvent:
			done = &e.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != "Patching." || done == nil {
		t.Fatalf("text %q, completed %v", text.String(), done != nil)
	}
	if len(done.Output) != 3 || done.OutputText() != "Patching." {
		t.Fatalf("output %+v", done.Output)
	}
	patch := done.Output[1].AsCustomToolCall()
	read := done.Output[2].AsFunctionCall()
	if patch.Name != "apply_patch" || patch.Input != "*** Begin Patch\n*** End Patch" || patch.CallID != "toolu_P" {
		t.Errorf("custom call %+v", patch)
	}
	if read.Name != "files__read" || read.Namespace != "mcp" || read.Arguments != `{"path":"a"}` {
		t.Errorf("function call %+v", read)
	}
	if u := done.Usage; u.InputTokens != 50 || u.OutputTokens != 20 || u.InputTokensDetails.CachedTokens != 10 {
		t.Errorf("usage %+v", u)
	}
}

func TestOpenAISDKReadsResponseAndFailure(t *testing.T) {
	dir := filepath.Join("testdata", "responses_openai")
	in, _ := os.ReadFile(filepath.Join(dir, "resp_custom_reasoning.in.json"))
	req, _ := os.ReadFile(filepath.Join(dir, "resp_custom_reasoning.req.json"))
	body, _, err := mustFromResponses(req).Answer(in, "")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := openaiClient(serve(t, 200, "application/json", body)).Responses.New(context.Background(), responsesParams)
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() != "Patching now." || resp.Output[0].AsReasoning().Summary[0].Text != "The patch is small." ||
		resp.Usage.OutputTokensDetails.ReasoningTokens != 12 || resp.Instructions.OfString != "Be brief." {
		t.Errorf("response %+v", resp)
	}

	in, _ = os.ReadFile(filepath.Join(dir, "stream_error.in.sse"))
	out := clientStreamSSE(mustFromResponses(pairs["responses_openai"].defaultStreamReq).Stream(""), in)
	stream := openaiClient(serve(t, 200, "text/event-stream", out)).Responses.NewStreaming(context.Background(), responsesParams)
	var failed *responses.ResponseFailedEvent
	for stream.Next() {
		if e, ok := stream.Current().AsAny().(responses.ResponseFailedEvent); ok {
			failed = &e
		}
	}
	if failed == nil || failed.Response.Status != "failed" || failed.Response.Error.Message != "Overloaded" {
		t.Fatalf("failed event %+v (stream error %v)", failed, stream.Err())
	}

	fe := &FieldError{Field: "previous_response_id", Msg: "needs the earlier response"}
	_, err = openaiClient(serve(t, 400, "application/json", fe.OpenAIBody())).Responses.New(context.Background(), responsesParams)
	var oe *osdk.Error
	if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Param != "previous_response_id" {
		t.Errorf("error %v", err)
	}
}
