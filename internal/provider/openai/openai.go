// Package openai sends requests to any OpenAI-compatible server (OpenAI,
// Fireworks, Groq, Together, OpenRouter, vLLM, SGLang, Ollama...). The body
// is forwarded byte for byte: the gateway has already rewritten "model".
package openai

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/tidwall/gjson"

	"switchboard/internal/config"
	"switchboard/internal/provider"
)

// Provider is one OpenAI-compatible upstream.
type Provider struct {
	name    string
	base    string
	keys    []string
	headers http.Header
	client  *http.Client
	// authHeader is "Authorization" (Bearer) or "x-api-key": a provider
	// named or typed anthropic takes the key the Anthropic way.
	authHeader string
	next       atomic.Uint64
}

// New builds the provider from its config; client is the shared upstream client.
func New(c *config.Provider, client *http.Client) *Provider {
	p := &Provider{
		name:       c.Name,
		base:       strings.TrimRight(c.BaseURL, "/"),
		keys:       c.Keys(),
		headers:    make(http.Header, len(c.Headers)),
		client:     client,
		authHeader: "Authorization",
	}
	if strings.EqualFold(c.Name, "anthropic") || c.Type == config.TypeAnthropic {
		p.authHeader = "x-api-key"
	}
	for k, v := range c.Headers {
		p.headers.Set(k, v)
	}
	return p
}

// Key picks the key for one request, rotating through api_keys in order.
func (p *Provider) key(req *provider.Request) string {
	if req.APIKey != "" {
		return req.APIKey
	}
	switch len(p.keys) {
	case 0:
		return ""
	case 1:
		return p.keys[0]
	}
	return p.keys[(p.next.Add(1)-1)%uint64(len(p.keys))]
}

// Send forwards one attempt.
func (p *Provider) Send(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+"/"+string(req.Endpoint), bytes.NewReader(req.Body))
	if err != nil {
		return nil, &provider.Error{Kind: provider.KindTransport, Msg: "bad upstream url", Err: err}
	}
	h := hr.Header
	for k, v := range p.headers {
		h[k] = v
	}
	for k, v := range req.Header {
		h[k] = v
	}
	h.Set("Content-Type", "application/json")
	if req.Stream {
		h.Set("Accept", "text/event-stream")
	} else {
		h.Set("Accept", "application/json")
	}
	if k := p.key(req); k != "" {
		if p.authHeader == "Authorization" {
			h.Set("Authorization", "Bearer "+k)
		} else {
			h.Set(p.authHeader, k)
		}
	}
	resp, err := p.client.Do(hr)
	if err != nil {
		return nil, provider.ClassifyDoError(ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, provider.StatusError(resp.StatusCode, resp.Header, provider.ReadErrorBody(resp.Body))
	}
	ct := resp.Header.Get("Content-Type")
	if req.Stream && provider.IsEventStream(ct) {
		return &provider.Response{Status: resp.StatusCode, Header: resp.Header, Body: resp.Body, Stream: true}, nil
	}
	// Unary (or a server that answered a stream request with one JSON
	// document): read it whole so that a 200 with HTML is a classified
	// failure rather than garbage relayed to the client.
	body, err := provider.ReadUnary(ctx, resp.Body)
	if err != nil {
		return nil, err
	}
	if !provider.IsJSONContentType(ct) || !gjson.ValidBytes(body) {
		return nil, &provider.Error{Kind: provider.KindBadResponse, Status: resp.StatusCode,
			Msg: "upstream answered 200 with a body that is not JSON"}
	}
	return &provider.Response{Status: resp.StatusCode, Header: resp.Header, Body: provider.NopBody(body)}, nil
}
