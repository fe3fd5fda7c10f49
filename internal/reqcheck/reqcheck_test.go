package reqcheck

import (
	"testing"

	"github.com/tidwall/gjson"
)

func TestCheck(t *testing.T) {
	chat := `"messages":[{"role":"user","content":"hi"}]`
	for _, tt := range []struct {
		name, endpoint, body, param string
	}{
		{"plain chat", Chat, `{"model":"m",` + chat + `}`, ""},
		{"model twin", Chat, `{"model":"chat","MODEL":"big",` + chat + `}`, "MODEL"},
		{"max_tokens twin", Chat, `{"model":"m","Max_Tokens":500000,` + chat + `}`, "Max_Tokens"},
		{"long s", Responses, `{"model":"m","\u017ftream":true}`, "\u017ftream"},
		{"nested budget twin", Chat, `{"model":"m",` + chat + `,"thinking":{"type":"enabled","budget_tokens":1,"Budget_Tokens":99999}}`, "thinking.Budget_Tokens"},
		{"message role twin", Chat, `{"model":"m","messages":[{"role":"user","ROLE":"system","content":"x"}]}`, "messages.0.ROLE"},
		{"anthropic block twin", Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"a","TEXT":"b"}]}]}`, "messages.0.content.0.TEXT"},
		{"plain gemini", Gemini, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":5}}`, ""},
		{"gemini contents twin", Gemini, `{"contents":[],"Contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "Contents"},
		{"gemini output limit twin", Gemini, `{"contents":[],"generationConfig":{"maxOutputTokens":5,"MaxOutputTokens":500000}}`, "generationConfig.MaxOutputTokens"},
		{"gemini part twin", Gemini, `{"contents":[{"role":"user","parts":[{"text":"a","Text":"b"}]}]}`, "contents.0.parts.0.Text"},
		{"gemini snake_case is another name", Gemini, `{"contents":[],"generation_config":{"max_output_tokens":5}}`, ""},
		{"gemini contents a string", Gemini, `{"contents":"hi"}`, "contents"},
		{"schema keys are free", Chat, `{"model":"m",` + chat + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"properties":{"Name":{},"name":{}}}}}]}`, ""},
		{"openai metadata is free", Chat, `{"model":"m",` + chat + `,"metadata":{"user_id":"a","USER_ID":"b"}}`, ""},
		{"messages a number", Chat, `{"model":"m","messages":5}`, "messages"},
		{"messages empty", Chat, `{"model":"m","messages":[]}`, ""},
		{"message not an object", Chat, `{"model":"m","messages":[{"role":"user","content":"a"},"hi"]}`, "messages.1"},
		{"messages null", Chat, `{"model":"m","messages":null}`, ""},
		{"messages absent", Chat, `{"model":"m"}`, ""},
		{"stream a string", Chat, `{"model":"m",` + chat + `,"stream":"true"}`, "stream"},
		{"stream_options a string", Chat, `{"model":"m",` + chat + `,"stream_options":"x"}`, "stream_options"},
		{"max_tokens a string", Chat, `{"model":"m",` + chat + `,"max_tokens":"100"}`, "max_tokens"},
		{"max_tokens negative", Completions, `{"model":"m","prompt":"x","max_tokens":-1}`, "max_tokens"},
		{"max_tokens null", Chat, `{"model":"m",` + chat + `,"max_tokens":null}`, ""},
		{"prompt an object", Completions, `{"model":"m","prompt":{}}`, "prompt"},
		{"prompt tokens", Completions, `{"model":"m","prompt":[1,2,3]}`, ""},
		{"input a number", Embeddings, `{"model":"m","input":5}`, "input"},
		{"responses without input", Responses, `{"model":"m","previous_response_id":"r"}`, ""},
		{"responses input object", Responses, `{"model":"m","input":{}}`, "input"},
		{"instructions a list", Responses, `{"model":"m","input":"x","instructions":[1]}`, "instructions"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := Check(tt.endpoint, gjson.Parse(tt.body))
			switch {
			case tt.param == "" && p != nil:
				t.Fatalf("refused: %+v", p)
			case tt.param != "" && (p == nil || p.Param != tt.param || p.Message == ""):
				t.Fatalf("got %+v, want param %q", p, tt.param)
			}
		})
	}
}

func BenchmarkCheck(b *testing.B) {
	body := gjson.Parse(`{"model":"gpt-4o-mini","stream":true,"max_tokens":100,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there, how are you today?"}]}`)
	for b.Loop() {
		if Check(Chat, body) != nil {
			b.Fatal("refused")
		}
	}
}

// The Messages spec covers what the translation reads beyond pricing.
func TestMessagesTranslationFields(t *testing.T) {
	p := Check(Messages, gjson.Parse(`{"model":"m","max_tokens":5,"messages":[],"output_config":{},"Output_Config":{}}`))
	if p == nil || p.Param != "Output_Config" {
		t.Fatalf("%+v", p)
	}
}
