package spend

import (
	"bytes"
	"encoding/json"
	"testing"
)

// compacted gives what json.Compact gives, and the body itself (no copy)
// when there is nothing to remove.
func TestCompacted(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		same       bool
	}{
		{"compact", `{"a":"x y","b":[1,2]}`, true},
		{"spaces inside strings only", `{"a":" \t ","b":"\" }"}`, true},
		{"escaped backslash then quote", `{"a":"x\\","b":1}`, true},
		{"spaces between tokens", `{"a": 1, "b" : [1, 2]}`, false},
		{"newlines", "{\n\"a\":1\n}", false},
		{"space after escaped quote in string", `{"a":"\" x","b": 1}`, false},
		{"invalid JSON keeps the body", `{"a": `, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			got := compacted(body)
			want := body
			var buf bytes.Buffer
			if json.Compact(&buf, body) == nil {
				want = buf.Bytes()
			}
			if !bytes.Equal(got, want) {
				t.Errorf("compacted = %s, want %s", got, want)
			}
			if same := len(got) > 0 && &got[0] == &body[0]; same != tc.same {
				t.Errorf("returned the body itself: %v, want %v", same, tc.same)
			}
		})
	}
}
