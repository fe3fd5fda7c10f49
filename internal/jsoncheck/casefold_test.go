package jsoncheck

import (
	"testing"

	"github.com/tidwall/gjson"
)

func TestCaseVariant(t *testing.T) {
	gen := NewFields("maxOutputTokens")
	block := NewFields("type", "text")
	block.Nest("content", block)
	top := NewFields("model", "max_tokens", "stream").Nest("generationConfig", gen).
		Nest("messages", NewFields("role").Nest("content", block))
	for _, tt := range []struct{ body, path, want string }{
		{`{"model":"a","max_tokens":5,"stream":true}`, "", ""},
		{`{"model":"a","MODEL":"b"}`, "MODEL", "model"},
		{`{"Max_Tokens":500000}`, "Max_Tokens", "max_tokens"},
		{`{"\u017ftream":true}`, "\u017ftream", "stream"},          // long s folds to s
		{`{"max_to\u212aens":1}`, "max_to\u212aens", "max_tokens"}, // Kelvin sign folds to k
		{`{"mo\u0044el":"b"}`, "moDel", "model"},                   // escaped in the JSON
		{`{"generationConfig":{"maxOutputTokens":1,"MAXOUTPUTTOKENS":9}}`, "generationConfig.MAXOUTPUTTOKENS", "maxOutputTokens"},
		{`{"messages":[{"role":"user"},{"ROLE":"system"}]}`, "messages.1.ROLE", "role"},
		{`{"messages":[{"role":"user","content":[{"type":"x","content":[{"Text":"t"}]}]}]}`, "messages.0.content.0.content.0.Text", "text"},
		{`{"other":{"MODEL":1},"tools":[{"Model":1}]}`, "", ""}, // not looked into
		{`{"messages":"MODEL"}`, "", ""},
	} {
		path, want, found := CaseVariant(gjson.Parse(tt.body), top)
		if found != (tt.path != "") || path != tt.path || want != tt.want {
			t.Errorf("%s: (%q, %q, %v), want (%q, %q)", tt.body, path, want, found, tt.path, tt.want)
		}
	}
}
