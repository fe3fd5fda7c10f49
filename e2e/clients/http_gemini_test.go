//go:build clients

package clients

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"switchboard/e2e/upstream"
)

// TestGeminiHTTP covers the Gemini API shapes that Google's SDKs and
// Gemini CLI do not use but other Gemini clients (curl examples, older
// SDKs, LangChain's) do: the JSON-array stream (streamGenerateContent
// without alt=sse), the key in ?key= or a Bearer header, and the /v1/
// path. Plain net/http, as those clients send it.
func TestGeminiHTTP(t *testing.T) {
	type shape struct {
		name   string
		path   string // after the API root; %s is the model, {key} the key
		stream bool   // the JSON-array stream
		auth   func(r *http.Request, key string)
	}
	shapes := []shape{
		{"array-stream", "/v1beta/models/%s:streamGenerateContent", true, func(r *http.Request, k string) { r.Header.Set("X-Goog-Api-Key", k) }},
		{"key-query", "/v1beta/models/%s:generateContent?key={key}", false, func(*http.Request, string) {}},
		{"bearer", "/v1beta/models/%s:generateContent", false, func(r *http.Request, k string) { r.Header.Set("Authorization", "Bearer "+k) }},
		{"v1-path", "/v1/models/%s:generateContent", false, func(r *http.Request, k string) { r.Header.Set("X-Goog-Api-Key", k) }},
	}
	// "direct": the same requests to the fake Gemini API, the control.
	for _, p := range []string{"direct", "anthropic", "openai", "gemini"} {
		t.Run("gemini-http/"+p, func(t *testing.T) {
			v := upstream.Vendor(p)
			if p == "direct" {
				v = upstream.Gemini
			}
			up := upstream.New(v, upstream.Options{Key: upstreamKey})
			t.Cleanup(up.Close)
			root, key := up.URL, upstreamKey
			var err error
			if p != "direct" {
				var g *gateway
				if g, err = startGateway(t, []route{{model: sdkModel, up: up}}); err == nil {
					root, key = g.URL, gatewayKey
				}
			}
			for _, s := range shapes {
				cell(t, s.name, func(t *testing.T) error {
					if err != nil {
						return err
					}
					m := marker()
					url := root + strings.ReplaceAll(fmt.Sprintf(s.path, sdkModel), "{key}", key)
					got, err := geminiHTTP(url, "Please say "+m, s.stream, func(r *http.Request) { s.auth(r, key) })
					if err != nil {
						return err
					}
					if !strings.Contains(got, "ack "+m) {
						return fmt.Errorf("answer %q, want it to contain %q", oneLine(got, 200), "ack "+m)
					}
					return nil
				})
			}
		})
	}
}

// geminiHTTP posts a one-turn generateContent request and returns the
// answer's text: of the one response, or of every element of the JSON
// array a stream without alt=sse is.
func geminiHTTP(url, prompt string, stream bool, auth func(*http.Request)) (string, error) {
	body, _ := json.Marshal(map[string]any{"contents": []any{map[string]any{"role": "user",
		"parts": []any{map[string]any{"text": prompt}}}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30e9)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	auth(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%d %s", resp.StatusCode, oneLine(string(b), 300))
	}
	type answer struct {
		Candidates []struct {
			Content struct{ Parts []struct{ Text string } }
		}
	}
	var list []answer
	if stream {
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			return "", fmt.Errorf("stream without alt=sse answered %q, want a JSON array (application/json)", ct)
		}
		if err := json.Unmarshal(b, &list); err != nil {
			return "", fmt.Errorf("not a JSON array of responses: %v: %s", err, oneLine(string(b), 200))
		}
	} else {
		var a answer
		if err := json.Unmarshal(b, &a); err != nil {
			return "", fmt.Errorf("not a GenerateContentResponse: %v: %s", err, oneLine(string(b), 200))
		}
		list = []answer{a}
	}
	var text strings.Builder
	for _, a := range list {
		for _, c := range a.Candidates {
			for _, p := range c.Content.Parts {
				text.WriteString(p.Text)
			}
		}
	}
	return text.String(), nil
}
