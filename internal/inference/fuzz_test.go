package inference

import (
	"encoding/json"
	"testing"

	"switchboard/internal/provider"
)

const chatBody = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
const streamBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`

// FuzzInspectBody: any client body is either refused with a 4xx or yields
// a non-empty model from a JSON object; nothing panics.
func FuzzInspectBody(f *testing.F) {
	f.Add([]byte(chatBody))
	f.Add([]byte(streamBody))
	f.Add([]byte(`{"model":"a","model":"b"}`))
	f.Add([]byte(`{"model":1}`))
	f.Add([]byte(`[{"model":"m"}]`))
	f.Add([]byte(`{"model":"m\u0000","stream":"true"}`))
	f.Add([]byte("{\"model\":\"m\"}\n{}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		model, _, e := inspectBody(body, provider.Chat)
		if e != nil {
			if e.Status < 400 || e.Status > 499 || e.Message == "" {
				t.Fatalf("refusal %+v", e)
			}
			return
		}
		var obj map[string]json.RawMessage
		if model == "" || json.Unmarshal(body, &obj) != nil {
			t.Fatalf("accepted %q as model %q", body, model)
		}
	})
}
