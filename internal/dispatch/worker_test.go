package dispatch

import "testing"

// A stream's terminal records the last usage its events reported.
func TestJobWriterKeepsStreamUsage(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"data: {\"choices\":[]}\n\n", ""},
		{"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\ndata: [DONE]\n\n", `{"prompt_tokens":3}`},
		{"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}\n\n", `{"output_tokens":7}`},
	} {
		w := &jobWriter{}
		w.noteUsage([]byte(tc.in))
		if string(w.usage) != tc.want {
			t.Errorf("%q: usage %q, want %q", tc.in, w.usage, tc.want)
		}
	}
}
