package proxy

import (
	"bytes"
	"testing"

	"github.com/tidwall/sjson"
)

// The attempt's "model" rewrite takes sjson's one-copy path: it must
// send the same bytes as the general path, whatever the body holds.
func TestModelRewriteSameBytes(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"first", `{"model":"a","messages":[]}`},
		{"last", `{"messages":[{"role":"user","content":"model"}],"model":"a"}`},
		{"absent", `{"messages":[]}`},
		{"empty object", `{}`},
		{"nested only", `{"x":{"model":"a"}}`},
		{"duplicate", `{"model":"a","model":"b"}`},
		{"non-string", `{"model":null,"n":1}`},
		{"object value", `{"model":{"id":"a"}}`},
		{"escaped key", `{"mod\u0065l":"a"}`},
		{"whitespace", "{ \"model\" :\t\"a\" ,\n\"n\":1}"},
		{"unicode", `{"model":"Zürich 東京","n":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []string{"up-model", `we"ird\`, "東京"} {
				want, werr := sjson.SetBytes([]byte(tc.body), "model", v)
				got, gerr := sjson.SetBytesOptions([]byte(tc.body), "model", v, optimistic)
				if !bytes.Equal(got, want) || (werr == nil) != (gerr == nil) {
					t.Fatalf("string %q: got %s (%v), want %s (%v)", v, got, gerr, want, werr)
				}
				raw := []byte(`"` + v + `"`)
				if v == `we"ird\` {
					raw = []byte(`"we\"ird\\"`)
				}
				want, werr = sjson.SetRawBytes([]byte(tc.body), "model", raw)
				got, gerr = sjson.SetRawBytesOptions([]byte(tc.body), "model", raw, optimistic)
				if !bytes.Equal(got, want) || (werr == nil) != (gerr == nil) {
					t.Fatalf("raw %s: got %s (%v), want %s (%v)", raw, got, gerr, want, werr)
				}
			}
		})
	}
}
