// Package gemini sends chat requests to Google's Gemini API
// (generateContent, streamGenerateContent with alt=sse), translating the
// internal OpenAI form both ways, streams event by event.
package gemini

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"switchboard/internal/config"
	"switchboard/internal/jsoncheck"
	"switchboard/internal/provider"
	"switchboard/internal/provider/translated"
	"switchboard/internal/translate"
)

// Provider is one Gemini upstream.
type Provider struct{ *provider.Upstream }

// New builds the provider from its config; client is the shared upstream
// client. base_url is the API root, e.g. .../v1beta.
func New(c *config.Provider, client *http.Client) *Provider {
	return &Provider{provider.NewUpstream(c, client)}
}

// NativeEndpoint names Gemini's protocol for pricing and estimates.
const NativeEndpoint = "generateContent"

// NativeBody implements provider.Natively: a chat request becomes a
// generateContent request.
func (p *Provider) NativeBody(req *provider.Request) (string, []byte, bool) {
	if req.Endpoint != provider.Chat {
		return "", nil, false
	}
	t, err := translate.NewOpenAIGemini(req.Body)
	if err != nil {
		return "", nil, false
	}
	req.Prepared = t
	return NativeEndpoint, t.Body(), true
}

// Serves implements provider.Limited: chat completions (translated) and
// Gemini's own generateContent and countTokens (passed through).
func (p *Provider) Serves(ep provider.Endpoint) bool {
	return ep == provider.Chat || ep == provider.GenerateContent || ep == provider.CountTokens
}

// Send performs one attempt.
func (p *Provider) Send(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	if req.Endpoint == provider.GenerateContent || req.Endpoint == provider.CountTokens {
		return p.passthrough(ctx, req)
	}
	if req.Endpoint != provider.Chat {
		msg := "provider " + p.Name + " (type gemini) cannot serve /v1/" + string(req.Endpoint)
		return nil, provider.StatusError(http.StatusBadRequest, nil,
			translate.OpenAIError(http.StatusBadRequest, msg, "", "unsupported_endpoint"))
	}
	t, err := Translator(req)
	if err != nil {
		return nil, err
	}
	model := req.Model
	if model == "" {
		model = t.Model()
	}
	path := "models/" + url.PathEscape(strings.TrimPrefix(model, "models/"))
	if req.Stream {
		path += ":streamGenerateContent?alt=sse"
	} else {
		path += ":generateContent"
	}
	return Exchange(ctx, p.Upstream, req, p.URL(path), t, func(hr *http.Request) {
		if k := p.Key(req); k != "" {
			hr.Header.Set("X-Goog-Api-Key", k)
		}
	})
}

// passthrough sends a Gemini client's own body to the model's method and
// relays the answer untouched (a stream as SSE, whatever form the client
// asked for: the gateway frames it).
func (p *Provider) passthrough(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	path := "models/" + url.PathEscape(strings.TrimPrefix(req.Model, "models/"))
	switch {
	case req.Endpoint == provider.CountTokens:
		path += ":countTokens"
	case req.Stream:
		path += ":streamGenerateContent?alt=sse"
	default:
		path += ":generateContent"
	}
	hr, err := p.NewRequest(ctx, p.URL(path), req, req.Body)
	if err != nil {
		return nil, err
	}
	if k := p.Key(req); k != "" {
		hr.Header.Set("X-Goog-Api-Key", k)
	}
	resp, err := p.Do(ctx, hr)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, provider.StatusError(resp.StatusCode, resp.Header, provider.ReadErrorBody(resp.Body))
	}
	ct := resp.Header.Get("Content-Type")
	if req.Stream {
		if !provider.IsEventStream(ct) {
			resp.Body.Close()
			return nil, translated.BadResponse(resp.StatusCode, "upstream answered a stream request without an event stream")
		}
		return &provider.Response{Status: resp.StatusCode, Header: resp.Header, Body: resp.Body, Stream: true}, nil
	}
	body, err := provider.ReadUnary(ctx, resp.Body)
	if err != nil {
		return nil, err
	}
	if !provider.IsJSONContentType(ct) || !jsoncheck.Valid(body) {
		return nil, translated.BadResponse(resp.StatusCode, "upstream answered 200 with a body that is not JSON")
	}
	return &provider.Response{Status: resp.StatusCode, Header: resp.Header, Body: provider.NopBody(body)}, nil
}

// Translator is the request's translation for a Gemini upstream: the one
// NativeBody made, else a new one; a refusal is a 400 in OpenAI's shape.
func Translator(req *provider.Request) (*translate.OpenAIGemini, error) {
	if t, _ := req.Prepared.(*translate.OpenAIGemini); t != nil {
		return t, nil
	}
	t, err := translate.NewOpenAIGemini(req.Body)
	if err != nil {
		var fe *translate.FieldError
		if errors.As(err, &fe) {
			return nil, provider.StatusError(fe.Status(), nil, fe.OpenAIBody())
		}
		return nil, provider.StatusError(http.StatusBadRequest, nil, translate.OpenAIError(http.StatusBadRequest, err.Error(), "", ""))
	}
	return t, nil
}

// Exchange posts t's generateContent body to url (a streaming one for a
// stream; prep sets the credentials) and translates the answer back.
// Vertex AI, which carries the Gemini API on its own addresses, shares it.
func Exchange(ctx context.Context, up *provider.Upstream, req *provider.Request, url string,
	t *translate.OpenAIGemini, prep func(*http.Request)) (*provider.Response, error) {
	hr, err := up.NewRequest(ctx, url, req, t.Body())
	if err != nil {
		return nil, err
	}
	prep(hr)
	resp, err := up.Do(ctx, hr)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, provider.StatusError(resp.StatusCode, resp.Header, t.Error(resp.StatusCode, provider.ReadErrorBody(resp.Body)))
	}
	ct := resp.Header.Get("Content-Type")
	if req.Stream {
		if !provider.IsEventStream(ct) {
			resp.Body.Close()
			return nil, translated.BadResponse(resp.StatusCode, "upstream answered a stream request without an event stream")
		}
		// Read to the first translated bytes: a blocked prompt or an
		// error event fails the attempt while failing over is possible.
		return translated.OpenStream(ctx, resp, translate.NewReader(resp.Body, t.Stream()))
	}
	body, err := provider.ReadUnary(ctx, resp.Body)
	if err != nil {
		return nil, err
	}
	if !provider.IsJSONContentType(ct) || !jsoncheck.Valid(body) {
		return nil, translated.BadResponse(resp.StatusCode, "upstream answered 200 with a body that is not JSON")
	}
	out, _, err := t.Response(body)
	if err != nil {
		var ue *translate.UpstreamError
		if errors.As(err, &ue) {
			return nil, provider.StatusError(ue.Status, resp.Header, ue.Body)
		}
		return nil, translated.BadResponse(resp.StatusCode, err.Error())
	}
	return &provider.Response{Status: resp.StatusCode, Header: translated.AnswerHeader(resp.Header, "application/json"), Body: provider.NopBody(out)}, nil
}
