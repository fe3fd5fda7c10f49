package vertex

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/provider"
	"switchboard/internal/provider/cloud/cloudtest"
)

type got struct {
	path, query, auth, anthropicVersion string
	body                                []byte
}

// fakeVertex answers Gemini and Claude on Vertex AI's paths for requests
// whose token the Google stand-in issued.
type fakeVertex struct {
	g    *cloudtest.Google
	mu   sync.Mutex
	reqs []got
}

const (
	geminiAnswer = `{"candidates":[{"content":{"role":"model","parts":[{"text":"hi from gemini"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":3,"totalTokenCount":10},"modelVersion":"gemini-2.5-flash"}`
	claudeAnswer = `{"id":"msg_vrtx_1","type":"message","role":"assistant","model":"claude-sonnet-4-5@20250929","content":[{"type":"text","text":"hi from claude"}],"stop_reason":"end_turn","usage":{"input_tokens":11,"output_tokens":4}}`
	claudeStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_vrtx_2\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5@20250929\",\"content\":[],\"usage\":{\"input_tokens\":11,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":4}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
)

func (f *fakeVertex) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, got{r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("Anthropic-Version"), b})
	f.mu.Unlock()
	if !f.g.Valid(r.Header.Get("Authorization")) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"code":401,"message":"Request had invalid authentication credentials. Expected OAuth 2 access token.","status":"UNAUTHENTICATED"}}`))
		return
	}
	switch {
	case strings.HasSuffix(r.URL.Path, ":generateContent"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(geminiAnswer))
	case strings.HasSuffix(r.URL.Path, ":rawPredict"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(claudeAnswer))
	case strings.HasSuffix(r.URL.Path, ":streamRawPredict"):
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(claudeStream))
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeVertex) last() got {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[len(f.reqs)-1]
}

func setup(t *testing.T, clk clock.Clock) (*Provider, *fakeVertex, *cloudtest.Google) {
	g := cloudtest.NewGoogle(t)
	f := &fakeVertex{g: g}
	up := httptest.NewServer(f)
	t.Cleanup(up.Close)
	cfg := &config.Provider{Name: "vx", Type: config.TypeVertex, BaseURL: up.URL, Project: "test-project", Location: "us-east5",
		CredentialsFile: g.ServiceAccountFile(t, t.TempDir())}
	return New(cfg, up.Client(), clk), f, g
}

func chat(model string, stream bool) *provider.Request {
	s := "false"
	if stream {
		s = "true"
	}
	return &provider.Request{Endpoint: provider.Chat, Model: model, Stream: stream,
		Body: []byte(`{"model":"` + model + `","stream":` + s + `,"max_tokens":50,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`)}
}

func read(t *testing.T, p *Provider, req *provider.Request) string {
	t.Helper()
	resp, err := p.Send(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestModelsAndPaths(t *testing.T) {
	p, f, _ := setup(t, nil)
	root := "/v1/projects/test-project/locations/us-east5/publishers/"
	tests := []struct {
		name     string
		req      *provider.Request
		path     string
		query    string
		contains string
	}{
		{"gemini unary", chat("gemini-2.5-flash", false), root + "google/models/gemini-2.5-flash:generateContent", "", `"content":"hi from gemini"`},
		{"claude unary", chat("claude-sonnet-4-5@20250929", false), root + "anthropic/models/claude-sonnet-4-5@20250929:rawPredict", "", `"content":"hi from claude"`},
		{"claude stream", chat("claude-sonnet-4-5@20250929", true), root + "anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict", "", `"content":"hi"`},
		{"native messages", &provider.Request{Endpoint: provider.Messages, Model: "claude-sonnet-4-5@20250929",
			Body: []byte(`{"model":"claude-sonnet-4-5@20250929","max_tokens":50,"messages":[{"role":"user","content":"hi"}],"cache_control":{"type":"ephemeral"}}`)},
			root + "anthropic/models/claude-sonnet-4-5@20250929:rawPredict", "", `"id":"msg_vrtx_1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := read(t, p, tt.req)
			s := f.last()
			if s.path != tt.path || s.query != tt.query {
				t.Fatalf("sent to %s?%s", s.path, s.query)
			}
			if !strings.Contains(out, tt.contains) {
				t.Fatalf("answer %s", out)
			}
			if strings.Contains(s.path, "anthropic") {
				if v := gjson.GetBytes(s.body, "anthropic_version").String(); v != AnthropicVersion || gjson.GetBytes(s.body, "model").Exists() || s.anthropicVersion != "" {
					t.Fatalf("claude body %s (header %q)", s.body, s.anthropicVersion)
				}
			}
			if tt.req.Endpoint == provider.Messages && !gjson.GetBytes(s.body, "cache_control").Exists() {
				t.Fatalf("a native field was lost: %s", s.body)
			}
		})
	}
	// Other publishers and endpoints are refused, naming the model.
	_, err := p.Send(context.Background(), chat("llama-3.3-70b", false))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 400 || !strings.Contains(string(pe.Body), "llama-3.3-70b") {
		t.Fatalf("err %v", err)
	}
	if !p.TakesMessages("claude-opus-4-1@20250805") || p.TakesMessages("gemini-2.5-pro") {
		t.Fatal("TakesMessages")
	}
}

// The token is one the endpoint issued from a signed JWT; it is refreshed
// from its expires_in before it expires, and dropped after a 401.
func TestTokenLifecycle(t *testing.T) {
	clk := clock.NewFake(time.Now())
	p, f, g := setup(t, clk)
	read(t, p, chat("gemini-2.5-flash", false))
	first := f.last().auth
	read(t, p, chat("gemini-2.5-flash", false))
	if g.Issued() != 1 || f.last().auth != first {
		t.Fatalf("%d tokens for two requests", g.Issued())
	}
	clk.Advance(56 * time.Minute) // 4 of its 60 minutes left
	read(t, p, chat("gemini-2.5-flash", false))
	if f.last().auth != first {
		t.Fatal("the request in the margin waited for a new token")
	}
	// The replacement, fetched in the background, serves the next ones.
	waitFor(t, func() bool {
		read(t, p, chat("gemini-2.5-flash", false))
		return f.last().auth != first
	})
	if g.Issued() != 2 {
		t.Fatalf("%d tokens issued", g.Issued())
	}
	g.Revoke()
	_, err := p.Send(context.Background(), chat("gemini-2.5-flash", false))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 401 || pe.Retryable() || !strings.Contains(pe.Msg, "invalid authentication credentials") {
		t.Fatalf("revoked: %v", err)
	}
	read(t, p, chat("gemini-2.5-flash", false))
	if g.Issued() != 3 {
		t.Fatalf("%d tokens issued, want a third after the 401", g.Issued())
	}
}

// A key Google refuses is a 401 with Google's reason; a token endpoint
// that does not answer fails the attempt within timeouts.open.
func TestCredentialFailures(t *testing.T) {
	g := cloudtest.NewGoogle(t)
	other := cloudtest.NewGoogle(t) // another account's key: Invalid JWT Signature
	f := &fakeVertex{g: g}
	up := httptest.NewServer(f)
	defer up.Close()
	file := other.ServiceAccountFile(t, t.TempDir())
	cfg := &config.Provider{Name: "vx", BaseURL: up.URL, Project: "test-project", Location: "global", CredentialsFile: file}
	// Point the other account's key at g's endpoint: signed by the wrong key.
	b, _ := readFile(file)
	writeFile(t, file, strings.ReplaceAll(b, other.URL, g.URL))
	_, err := New(cfg, up.Client(), nil).Send(context.Background(), chat("gemini-2.5-pro", false))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 401 || !strings.Contains(pe.Msg, "Invalid JWT Signature") {
		t.Fatalf("wrong key: %#v", err)
	}

	cfg.CredentialsFile = g.ServiceAccountFile(t, t.TempDir())
	g.Hang.Store(true)
	client := provider.NewHTTPClient(provider.ClientOptions{Open: 150 * time.Millisecond, Read: time.Minute, Write: time.Minute})
	start := time.Now()
	_, err = New(cfg, client, nil).Send(context.Background(), chat("gemini-2.5-pro", false))
	if !errors.As(err, &pe) || pe.Kind != provider.KindTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("hanging issuer, after %v: %#v", time.Since(start), err)
	}

	cfg.CredentialsFile = writeFile(t, t.TempDir()+"/bad.json", `{"type":"api_key"}`)
	_, err = New(cfg, up.Client(), nil).Send(context.Background(), chat("gemini-2.5-pro", false))
	if !errors.As(err, &pe) || pe.Status != 401 || !strings.Contains(pe.Msg, `type "api_key"`) {
		t.Fatalf("bad file: %#v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 2000 {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("condition not met")
}

func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}

func writeFile(t *testing.T, p, s string) string {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
