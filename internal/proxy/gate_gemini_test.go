package proxy

import (
	"testing"

	"switchboard/internal/provider"
	"switchboard/internal/sse"
)

func TestGeminiGate(t *testing.T) {
	tests := []struct {
		name, data string
		want       Verdict
	}{
		{"keep-alive", ``, Hold},
		{"broken JSON", `{"candidates":[`, Fail},
		{"error object", `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`, Fail},
		{"text", `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"}]},"index":0}]}`, Commit},
		{"thought", `{"candidates":[{"content":{"parts":[{"text":"hmm","thought":true}]}}]}`, Commit},
		{"function call", `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]}}]}`, Commit},
		{"empty parts", `{"candidates":[{"content":{"role":"model","parts":[]},"index":0}]}`, Hold},
		{"STOP with nothing", `{"candidates":[{"content":{"parts":[]},"finishReason":"STOP"}]}`, Empty},
		{"MAX_TOKENS with nothing (hidden thinking)", `{"candidates":[{"finishReason":"MAX_TOKENS"}]}`, Commit},
		{"SAFETY", `{"candidates":[{"finishReason":"SAFETY"}]}`, Commit},
		{"blocked prompt", `{"promptFeedback":{"blockReason":"SAFETY"}}`, Commit},
		{"usage only", `{"usageMetadata":{"promptTokenCount":3}}`, Hold},
	}
	gate := GateFor(provider.GenerateContent)
	for _, tc := range tests {
		ev := sse.Event{Data: []byte(tc.data)}
		if got := gate(&ev); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
