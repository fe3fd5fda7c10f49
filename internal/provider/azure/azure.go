// Package azure sends requests to Azure OpenAI. The wire protocol is
// OpenAI's, so bodies go out as they are (the gateway has already written
// the deployment name into "model"); what differs is the address, a route's
// model being the deployment:
//
//	{base_url}/openai/deployments/{deployment}/{endpoint}?api-version=V
//	{base_url}/openai/responses?api-version=V       (Responses: model in the body)
//	{base_url}/openai/v1/{endpoint}                 (api_version: v1)
//
// and the authentication: the resource's key in an api-key header, or a
// Microsoft Entra ID token (entra.go). Azure's own errors (content filter,
// DeploymentNotFound) are OpenAI-shaped already and relayed as they are.
package azure

import (
	"context"
	"net/http"
	"net/url"

	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/jsoncheck"
	"switchboard/internal/provider"
	"switchboard/internal/provider/bearer"
	"switchboard/internal/provider/cloud"
	"switchboard/internal/provider/openai"
	"switchboard/internal/translate"
)

// Provider is one Azure OpenAI resource.
type Provider struct {
	*provider.Upstream
	version string // the api-version query; "" with the v1 paths
	// entra is the Entra ID token; nil when the resource key is used.
	entra *bearer.Cache
}

// New builds the provider; client is the shared upstream client, clk the
// clock token expiry is read from (nil = real).
func New(c *config.Provider, client *http.Client, clk clock.Clock) *Provider {
	p := &Provider{Upstream: provider.NewUpstream(c, client)}
	if c.APIVersion != config.AzureV1 {
		p.version = c.APIVersion
	}
	if c.Entra != nil {
		p.entra = bearer.New(entraFetch(c.Entra, client), clk)
	}
	return p
}

// Serves implements provider.Limited: the OpenAI endpoints Azure has.
func (p *Provider) Serves(ep provider.Endpoint) bool {
	switch ep {
	case provider.Chat, provider.Completions, provider.Embeddings, provider.Responses:
		return true
	}
	return false
}

// path is the address of one attempt under base_url.
func (p *Provider) path(ep provider.Endpoint, deployment string) string {
	if p.version == "" {
		return "openai/v1/" + string(ep)
	}
	q := "?api-version=" + url.QueryEscape(p.version)
	if ep == provider.Responses {
		return "openai/responses" + q
	}
	return "openai/deployments/" + url.PathEscape(deployment) + "/" + string(ep) + q
}

// Send performs one attempt.
func (p *Provider) Send(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	if !p.Serves(req.Endpoint) {
		msg := "provider " + p.Name + " (type azure) cannot serve /v1/" + string(req.Endpoint)
		return nil, provider.StatusError(http.StatusBadRequest, nil,
			translate.OpenAIError(http.StatusBadRequest, msg, "", "unsupported_endpoint"))
	}
	hr, err := p.NewRequest(ctx, p.URL(p.path(req.Endpoint, req.Model)), req, req.Body)
	if err != nil {
		return nil, err
	}
	delete(hr.Header, "Api-Key") // a client's own, forwarded: the gateway's credential goes
	token := ""
	if p.entra != nil {
		if token, err = p.entra.Get(ctx, cloud.OpenTimeout(p.Client)); err != nil {
			status, reason := entraFailure(err)
			return nil, cloud.CredentialError(ctx, p.Name, "Microsoft Entra ID", status, reason, err)
		}
		hr.Header["Authorization"] = []string{"Bearer " + token}
	} else if k := p.Key(req); k != "" {
		hr.Header["Api-Key"] = []string{k}
	}
	resp, err := p.Do(ctx, hr)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body := provider.ReadErrorBody(resp.Body)
		if resp.StatusCode == http.StatusUnauthorized && token != "" {
			p.entra.Drop(token) // revoked or expired early: the next attempt fetches anew
		}
		if !jsoncheck.Valid(body) {
			body = translate.OpenAIError(resp.StatusCode, cloud.Clean(string(body)), "", "")
		}
		return nil, cloud.Refused(resp.StatusCode, resp.Header, body)
	}
	// Relayed as OpenAI's: Azure's first stream chunk
	// (prompt_filter_results, no choices) and its content_filter_results
	// ride along.
	return openai.Answer(ctx, req, resp)
}
