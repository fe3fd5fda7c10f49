package front

import (
	"net/http/httptest"
	"testing"
)

func TestProtocolAndPresentedKey(t *testing.T) {
	cases := []struct {
		path, header, value string
		proto               Protocol
		key                 string
	}{
		{"/v1/chat/completions", "Authorization", "Bearer k1", OpenAI, "k1"},
		{"/v1/messages", "X-Api-Key", "k2", Anthropic, "k2"},
		{"/v1/messages/count_tokens", "X-Api-Key", "k2", Anthropic, "k2"},
		{"/v1beta/models/m:generateContent", "X-Goog-Api-Key", "k3", Gemini, "k3"},
		{"/v1beta/models/m:generateContent?key=k4", "", "", Gemini, "k4"},
		{"/v1/models/m:streamGenerateContent?alt=sse&key=k5", "", "", Gemini, "k5"},
		{"/v1beta/models", "Authorization", "Bearer k6", Gemini, "k6"},
		// ?key= is Google's convention only: elsewhere a key in the URL
		// (which proxies log) is not taken.
		{"/v1/chat/completions?key=k7", "", "", OpenAI, ""},
		{"/v1/models/m", "", "", OpenAI, ""},
	}
	for _, c := range cases {
		r := httptest.NewRequest("POST", c.path, nil)
		if c.header != "" {
			r.Header.Set(c.header, c.value)
		}
		if p := ProtocolOf(r); p != c.proto {
			t.Errorf("%s: protocol %d, want %d", c.path, p, c.proto)
		}
		if k := PresentedKey(r); k != c.key {
			t.Errorf("%s: key %q, want %q", c.path, k, c.key)
		}
	}
}

func TestGeminiErrorBody(t *testing.T) {
	got := string(ErrorBody(Gemini, &Error{Status: 429, Message: "slow down"}))
	want := `{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}`
	if got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}
