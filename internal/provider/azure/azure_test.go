package azure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/provider"
	"switchboard/internal/provider/cloud"
)

const chatAnswer = `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`

type seen struct {
	path, query, apiKey, auth string
	body                      string
}

// fakeAzure answers chat, embeddings and responses in Azure's paths and
// records what it was sent.
type fakeAzure struct {
	mu   sync.Mutex
	reqs []seen
	// auth decides whether a request's credentials are good.
	auth func(r *http.Request) bool
}

func (f *fakeAzure) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, seen{r.URL.Path, r.URL.RawQuery, r.Header.Get("api-key"), r.Header.Get("Authorization"), string(b)})
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if f.auth != nil && !f.auth(r) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription."}}`))
		return
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/deployments/missing/chat/completions"):
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}`))
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		_, _ = w.Write([]byte(chatAnswer))
	case strings.HasSuffix(r.URL.Path, "/embeddings"):
		_, _ = w.Write([]byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":2,"total_tokens":2}}`))
	case strings.HasSuffix(r.URL.Path, "/responses"):
		_, _ = w.Write([]byte(`{"id":"resp_1","object":"response","status":"completed","model":"gpt-4o","output":[],"usage":{"input_tokens":3,"output_tokens":1,"total_tokens":4}}`))
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeAzure) last() seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[len(f.reqs)-1]
}

func send(p *Provider, ep provider.Endpoint, model string, h http.Header) (*provider.Response, error) {
	return p.Send(context.Background(), &provider.Request{Endpoint: ep, Model: model, Header: h,
		Body: []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`)})
}

func TestPathsAndKey(t *testing.T) {
	f := &fakeAzure{}
	up := httptest.NewServer(f)
	defer up.Close()
	tests := []struct {
		name, base, version string
		ep                  provider.Endpoint
		wantPath, wantQuery string
	}{
		{"deployment chat", up.URL, "2024-10-21", provider.Chat, "/openai/deployments/gpt4o-prod/chat/completions", "api-version=2024-10-21"},
		{"deployment embeddings", up.URL + "/", "2024-10-21", provider.Embeddings, "/openai/deployments/gpt4o-prod/embeddings", "api-version=2024-10-21"},
		{"responses", up.URL, "2025-04-01-preview", provider.Responses, "/openai/responses", "api-version=2025-04-01-preview"},
		{"v1 chat", up.URL, "v1", provider.Chat, "/openai/v1/chat/completions", ""},
		{"v1 responses", up.URL, "v1", provider.Responses, "/openai/v1/responses", ""},
		{"gateway prefix with its own query", up.URL + "/apim?subscription=s1", "2024-10-21", provider.Chat, "/apim/openai/deployments/gpt4o-prod/chat/completions", "subscription=s1&api-version=2024-10-21"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(&config.Provider{Name: "az", Type: config.TypeAzure, BaseURL: tt.base, APIVersion: tt.version, APIKey: "resource-key"}, up.Client(), nil)
			h := http.Header{"Authorization": {"Bearer client-gateway-key"}, "Api-Key": {"client-own"}}
			resp, err := send(p, tt.ep, "gpt4o-prod", h)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			s := f.last()
			if s.path != tt.wantPath || s.query != tt.wantQuery {
				t.Fatalf("sent to %s?%s, want %s?%s", s.path, s.query, tt.wantPath, tt.wantQuery)
			}
			if s.apiKey != "resource-key" || s.auth != "" {
				t.Fatalf("api-key %q, Authorization %q", s.apiKey, s.auth)
			}
		})
	}
}

// DeploymentNotFound and a bad key come back in OpenAI's shape; the bad
// key's reason is the attempt's message.
func TestErrors(t *testing.T) {
	f := &fakeAzure{auth: func(r *http.Request) bool { return r.Header.Get("api-key") == "good" }}
	up := httptest.NewServer(f)
	defer up.Close()
	good := New(&config.Provider{Name: "az", BaseURL: up.URL, APIVersion: "2024-10-21", APIKey: "good"}, up.Client(), nil)
	_, err := send(good, provider.Chat, "missing", nil)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 404 || !strings.Contains(string(pe.Body), "DeploymentNotFound") {
		t.Fatalf("err %v", err)
	}
	bad := New(&config.Provider{Name: "az", BaseURL: up.URL, APIVersion: "2024-10-21", APIKey: "revoked"}, up.Client(), nil)
	_, err = send(bad, provider.Chat, "gpt4o", nil)
	if !errors.As(err, &pe) || pe.Status != 401 || pe.Retryable() || !strings.Contains(pe.Msg, "Access denied due to invalid subscription key") {
		t.Fatalf("err %#v", err)
	}
	if strings.Contains(pe.Error(), "revoked") {
		t.Fatal("the key reached the error")
	}
}

// fakeEntra is an Entra ID authority: OpenID discovery and a token
// endpoint that issues tokens for one app's secret, each valid for life.
type fakeEntra struct {
	mu     sync.Mutex
	issued map[string]bool
	n      atomic.Int32
	life   int // expires_in, seconds
	secret string
}

func (e *fakeEntra) handler(base func() string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /tenant-1/v2.0/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"token_endpoint":"%[1]s/tenant-1/oauth2/v2.0/token","authorization_endpoint":"%[1]s/tenant-1/oauth2/v2.0/authorize","issuer":"%[1]s/tenant-1/v2.0"}`, base())
	})
	mux.HandleFunc("POST /tenant-1/oauth2/v2.0/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if r.Form.Get("client_id") != "app-1" || r.Form.Get("client_secret") != e.secret || !strings.Contains(r.Form.Get("scope"), Scope) {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret provided."}`))
			return
		}
		tok := fmt.Sprintf("entra-token-%d", e.n.Add(1))
		e.mu.Lock()
		e.issued[tok] = true
		e.mu.Unlock()
		fmt.Fprintf(w, `{"token_type":"Bearer","expires_in":%d,"ext_expires_in":%d,"access_token":"%s"}`, e.life, e.life, tok)
	})
	return mux
}

func (e *fakeEntra) valid(auth string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.issued[strings.TrimPrefix(auth, "Bearer ")]
}

// revoke makes every token issued so far invalid at the API.
func (e *fakeEntra) revoke() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.issued = map[string]bool{}
}

// Entra client secret against a local authority (TLS, as MSAL demands):
// the API sees only tokens the authority issued; a token is refreshed
// before it expires and dropped after a 401.
func TestEntraClientSecret(t *testing.T) {
	entra := &fakeEntra{issued: map[string]bool{}, life: 3600, secret: "s3cret"}
	api := &fakeAzure{auth: func(r *http.Request) bool { return entra.valid(r.Header.Get("Authorization")) }}
	var srv *httptest.Server
	mux := http.NewServeMux()
	mux.Handle("/tenant-1/", entra.handler(func() string { return srv.URL }))
	mux.Handle("/openai/", api)
	srv = httptest.NewTLSServer(mux)
	defer srv.Close()
	clk := clock.NewFake(time.Now())
	cfg := &config.Provider{Name: "az", BaseURL: srv.URL, APIVersion: "2024-10-21",
		Entra: &config.Entra{Method: config.EntraClientSecret, TenantID: "tenant-1", ClientID: "app-1", ClientSecret: "s3cret", AuthorityHost: srv.URL + "/"}}
	p := New(cfg, srv.Client(), clk)

	ok := func(step string) string {
		t.Helper()
		resp, err := send(p, provider.Chat, "gpt4o", nil)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		resp.Body.Close()
		return api.last().auth
	}
	first := ok("first")
	if first != "Bearer entra-token-1" || api.last().apiKey != "" {
		t.Fatalf("first request sent %q", first)
	}
	ok("cached")
	if entra.n.Load() != 1 {
		t.Fatalf("%d tokens issued for two requests", entra.n.Load())
	}
	// 57 minutes on: inside the 5-minute margin, replaced in the background.
	clk.Advance(57 * time.Minute)
	if got := ok("in the margin"); got != first {
		t.Fatalf("the request in the margin waited for a new token: %q", got)
	}
	waitFor(t, func() bool { return ok("after the refresh") == "Bearer entra-token-2" })
	// Revoked at the API: a 401, the token dropped, the next attempt
	// gets a new one.
	entra.revoke()
	_, err := send(p, provider.Chat, "gpt4o", nil)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 401 {
		t.Fatalf("revoked: %v", err)
	}
	if got := ok("after the 401"); got != "Bearer entra-token-3" {
		t.Fatalf("after the 401: %q", got)
	}
}

// A wrong secret is a 401 credential error naming Entra's reason, not the
// secret; an authority that does not answer fails the attempt within
// timeouts.open.
func TestEntraFailures(t *testing.T) {
	entra := &fakeEntra{issued: map[string]bool{}, life: 3600, secret: "right"}
	var srv *httptest.Server
	srv = httptest.NewTLSServer(entra.handler(func() string { return srv.URL }))
	defer srv.Close()
	cfg := &config.Provider{Name: "az", BaseURL: srv.URL, APIVersion: "v1",
		Entra: &config.Entra{Method: config.EntraClientSecret, TenantID: "tenant-1", ClientID: "app-1", ClientSecret: "wrong-secret-value", AuthorityHost: srv.URL + "/"}}
	_, err := send(New(cfg, srv.Client(), nil), provider.Chat, "gpt4o", nil)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 401 || pe.Retryable() || !strings.Contains(pe.Msg, "AADSTS7000215") {
		t.Fatalf("err %#v", err)
	}
	if strings.Contains(pe.Msg+string(pe.Body), "wrong-secret-value") {
		t.Fatal("the secret reached the error")
	}
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	if json.Unmarshal(pe.Body, &body); body.Error.Code != cloud.CodeCredentials {
		t.Fatalf("body %s", pe.Body)
	}

	hang := make(chan struct{})
	stuck := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer stuck.Close()
	defer close(hang)
	client := provider.NewHTTPClient(provider.ClientOptions{Open: 200 * time.Millisecond, Read: time.Minute, Write: time.Minute})
	cfg.Entra.AuthorityHost = stuck.URL + "/"
	start := time.Now()
	_, err = send(New(cfg, client, nil), provider.Chat, "gpt4o", nil)
	if !errors.As(err, &pe) || pe.Kind != provider.KindTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("after %v: %#v", time.Since(start), err)
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
