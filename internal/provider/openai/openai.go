// Package openai sends requests to any OpenAI-compatible server (OpenAI,
// Fireworks, Groq, Together, OpenRouter, vLLM, SGLang, Ollama...). The body
// is forwarded byte for byte: the gateway has already rewritten "model".
package openai

import (
	"context"
	"net/http"
	"strings"

	"switchboard/internal/config"
	"switchboard/internal/jsoncheck"
	"switchboard/internal/provider"
)

// Provider is one OpenAI-compatible upstream.
type Provider struct {
	*provider.Upstream
	// bearer is false for a provider named or typed anthropic, which takes
	// the key as x-api-key.
	bearer bool
}

// New builds the provider from its config; client is the shared upstream client.
func New(c *config.Provider, client *http.Client) *Provider {
	return &Provider{Upstream: provider.NewUpstream(c, client),
		bearer: !strings.EqualFold(c.Name, "anthropic") && c.Type != config.TypeAnthropic}
}

// Send forwards one attempt.
func (p *Provider) Send(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	hr, err := p.NewRequest(ctx, p.URL(string(req.Endpoint)), req, req.Body)
	if err != nil {
		return nil, err
	}
	if k := p.Key(req); k != "" {
		if p.bearer {
			hr.Header["Authorization"] = p.Bearer(k)
		} else {
			hr.Header.Set("X-Api-Key", k)
		}
	}
	resp, err := p.Do(ctx, hr)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, provider.StatusError(resp.StatusCode, resp.Header, provider.ReadErrorBody(resp.Body))
	}
	return Answer(ctx, req, resp)
}

// Answer reads a 2xx answer of the OpenAI protocol: a stream relayed as
// it is, or a unary answer read whole so that a 200 with HTML is a
// classified failure rather than garbage relayed to the client (also for
// a server that answered a stream request with one JSON document).
func Answer(ctx context.Context, req *provider.Request, resp *http.Response) (*provider.Response, error) {
	ct := resp.Header.Get("Content-Type")
	if req.Stream && provider.IsEventStream(ct) {
		return &provider.Response{Status: resp.StatusCode, Header: resp.Header, Body: resp.Body, Stream: true}, nil
	}
	body, err := provider.ReadUnarySized(ctx, resp.Body, resp.ContentLength)
	if err != nil {
		return nil, err
	}
	if !provider.IsJSONContentType(ct) || !jsoncheck.Valid(body) {
		return nil, &provider.Error{Kind: provider.KindBadResponse, Status: resp.StatusCode,
			Msg: "upstream answered 200 with a body that is not JSON"}
	}
	return &provider.Response{Status: resp.StatusCode, Header: resp.Header, Body: provider.JSONBody(body)}, nil
}
