package server

import (
	"fmt"
	"testing"
)

// TestKeylessLocalProvider: an openai-type provider without api_key (a
// local vLLM or Ollama) loads and is called without any Authorization.
func TestKeylessLocalProvider(t *testing.T) {
	u := newUpstream(t, okChat)
	g := startGateway(t, fmt.Sprintf("providers:\n  local: {base_url: %s}\nmodels:\n  - name: m\n    providers: [{provider: local, model: llama}]\n", u.URL))
	if a := g.post("/v1/chat/completions", chatBody); a.Status != 200 {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	h, _ := u.last()
	if v, ok := h["Authorization"]; ok {
		t.Fatalf("a keyless provider got Authorization %q", v)
	}
}
