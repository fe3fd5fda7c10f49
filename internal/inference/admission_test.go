package inference

import (
	"testing"

	"github.com/tidwall/gjson"
)

func TestSetUsageField(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"appended", `{"id":"x","usage":{"prompt_tokens":1,"completion_tokens":2}}`,
			`{"id":"x","usage":{"prompt_tokens":1,"completion_tokens":2,"cost_usd":0.5}}`},
		{"usage first, spaces kept", `{ "usage" : { "prompt_tokens" : 1 } , "id":"x"}`,
			`{ "usage" : { "prompt_tokens" : 1 ,"cost_usd":0.5} , "id":"x"}`},
		{"empty usage", `{"usage":{}}`, `{"usage":{"cost_usd":0.5}}`},
		{"empty usage with a newline", "{\"usage\":{\n}}", "{\"usage\":{\n\"cost_usd\":0.5}}"},
		{"already there: replaced", `{"usage":{"cost_usd":9,"prompt_tokens":1}}`, `{"usage":{"cost_usd":0.5,"prompt_tokens":1}}`},
		{"nested objects inside usage", `{"usage":{"d":{"a":{}},"n":1},"z":{}}`, `{"usage":{"d":{"a":{}},"n":1,"cost_usd":0.5},"z":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := gjson.Get(tt.body, "usage")
			got := string(setUsageField([]byte(tt.body), u, "cost_usd", []byte("0.5")))
			if got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			if !gjson.Valid(got) {
				t.Fatalf("not JSON: %s", got)
			}
		})
	}
}
