package translate_test

import (
	"errors"
	"fmt"

	"switchboard/internal/translate"
)

// A Gemini client's request served by a provider that is not gemini: the
// request is translated into the internal form, the provider's chat
// answer back into a GenerateContentResponse.
func ExampleFromGemini() {
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],
		"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}],
		"generationConfig":{"maxOutputTokens":64}}`)
	in, err := translate.FromGemini(body, "gemini-3-flash", false)
	if err != nil {
		var fe *translate.FieldError
		if errors.As(err, &fe) {
			fmt.Printf("%d %s\n", fe.Status(), fe.GeminiBody())
		}
		return
	}
	fmt.Printf("internal: %s\n", in.Body)
	fmt.Printf("X-Switchboard-Dropped: %s\n", translate.DroppedHeader(in.Dropped))

	chat := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"claude-x",
		"choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}],
		"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`)
	answer, usage, _ := in.Answer(chat, "")
	fmt.Printf("answer: %s\nmetered: %d in, %d out\n", answer, usage.Input, usage.Output)
	// Output:
	// internal: {"model":"gemini-3-flash","messages":[{"role":"user","content":"hi"}],"max_tokens":64}
	// X-Switchboard-Dropped: safetySettings
	// answer: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hello!"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2,"totalTokenCount":5},"modelVersion":"claude-x","responseId":"chatcmpl-1"}
	// metered: 3 in, 2 out
}

// A Responses client streaming from a provider that is not openai: each
// chunk of the internal stream becomes Responses events (write each as
// "event: <Name>\ndata: <Data>\n\n"); a failure after the start ends the
// stream with response.failed.
func ExampleResponsesStream() {
	in, err := translate.FromResponses([]byte(`{"model":"gpt-5","input":"hi","stream":true}`))
	if err != nil {
		return
	}
	s := in.Stream("")
	evs, _ := s.Chunk([]byte(`{"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"claude-x",
		"choices":[{"index":0,"delta":{"content":"Hel"}}]}`))
	evs = append(evs, s.Fail(504, translate.OpenAIError(504, "the provider stopped answering", "", ""))...)
	for _, e := range evs {
		fmt.Println(e.Name)
	}
	// Output:
	// response.created
	// response.in_progress
	// response.output_item.added
	// response.content_part.added
	// response.output_text.delta
	// response.failed
}
