// Package anthropic sends requests to Anthropic's Messages API. Chat
// requests (the internal OpenAI form) are translated both ways, streams
// event by event; native Messages requests from Anthropic clients pass
// through untouched.
package anthropic

import (
	"context"
	"errors"
	"net/http"

	api "switchboard/internal/api/anthropic"
	"switchboard/internal/config"
	"switchboard/internal/jsoncheck"
	"switchboard/internal/provider"
	"switchboard/internal/provider/translated"
	"switchboard/internal/translate"
)

// Provider is one Anthropic upstream.
type Provider struct{ *provider.Upstream }

// New builds the provider from its config; client is the shared upstream
// client. base_url is the API root including /v1.
func New(c *config.Provider, client *http.Client) *Provider {
	return &Provider{provider.NewUpstream(c, client)}
}

// Serves implements provider.Limited: chat completions (translated) and
// the Messages API (passed through).
func (p *Provider) Serves(ep provider.Endpoint) bool {
	return ep == provider.Chat || ep == provider.Messages || ep == provider.MessagesCountTokens
}

// Send performs one attempt.
func (p *Provider) Send(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	switch req.Endpoint {
	case provider.Chat:
		return p.chat(ctx, req)
	case provider.Messages:
		return p.passthrough(ctx, req)
	case provider.MessagesCountTokens:
		return Exchange(ctx, p.Upstream, req, p.URL("messages/count_tokens"), req.Body, nil, p.prep(req))
	}
	msg := "provider " + p.Name + " (type anthropic) cannot serve /v1/" + string(req.Endpoint)
	return nil, provider.StatusError(http.StatusBadRequest, nil,
		translate.OpenAIError(http.StatusBadRequest, msg, "", "unsupported_endpoint"))
}

// NativeBody implements provider.Natively: a chat request becomes a
// Messages request (a native one is sent as it is).
func (p *Provider) NativeBody(req *provider.Request) (string, []byte, bool) {
	if req.Endpoint != provider.Chat {
		return "", nil, false
	}
	t, err := translate.NewOpenAIAnthropic(req.Body)
	if err != nil {
		return "", nil, false
	}
	req.Prepared = t
	return string(provider.Messages), t.Body(), true
}

// prep sets the anthropic-version header (unless the client sent one)
// and the key of one attempt.
func (p *Provider) prep(req *provider.Request) func(*http.Request) {
	return func(hr *http.Request) {
		if hr.Header.Get("anthropic-version") == "" {
			hr.Header.Set("anthropic-version", api.Version)
		}
		if k := p.Key(req); k != "" {
			hr.Header.Set("X-Api-Key", k)
		}
	}
}

// passthrough forwards a native Messages request and its answer untouched.
func (p *Provider) passthrough(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	return Exchange(ctx, p.Upstream, req, p.URL("messages"), req.Body, nil, p.prep(req))
}

// chat translates an OpenAI chat request, sends it and translates the
// answer back.
func (p *Provider) chat(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	t, err := Translator(req)
	if err != nil {
		return nil, err
	}
	return Exchange(ctx, p.Upstream, req, p.URL("messages"), t.Body(), t, p.prep(req))
}

// Translator is the request's translation for an Anthropic upstream: the
// one NativeBody made, else a new one; a refusal is a 400 in OpenAI's
// shape.
func Translator(req *provider.Request) (*translate.OpenAIAnthropic, error) {
	if t, _ := req.Prepared.(*translate.OpenAIAnthropic); t != nil {
		return t, nil
	}
	t, err := translate.NewOpenAIAnthropic(req.Body)
	if err != nil {
		return nil, refusal(err)
	}
	return t, nil
}

// Exchange posts a Messages body to url (prep sets the credentials) and
// reads the answer: relayed untouched when t is nil (a native request),
// else translated into the internal form with t, streams event by event.
// Clouds that carry the Messages API on their own addresses (Vertex AI's
// rawPredict) share it.
func Exchange(ctx context.Context, up *provider.Upstream, req *provider.Request, url string, body []byte,
	t *translate.OpenAIAnthropic, prep func(*http.Request)) (*provider.Response, error) {
	hr, err := up.NewRequest(ctx, url, req, body)
	if err != nil {
		return nil, err
	}
	prep(hr)
	resp, err := up.Do(ctx, hr)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		errBody := provider.ReadErrorBody(resp.Body)
		if t != nil {
			errBody = t.Error(resp.StatusCode, errBody)
		}
		return nil, provider.StatusError(resp.StatusCode, resp.Header, errBody)
	}
	ct := resp.Header.Get("Content-Type")
	if req.Stream {
		switch {
		case t != nil && provider.IsEventStream(ct):
			return translated.OpenStream(ctx, resp, translate.NewReader(resp.Body, t.Stream()))
		case t != nil:
			resp.Body.Close()
			return nil, translated.BadResponse(resp.StatusCode, "upstream answered a stream request without an event stream")
		case provider.IsEventStream(ct):
			return &provider.Response{Status: resp.StatusCode, Header: resp.Header, Body: resp.Body, Stream: true}, nil
		}
	}
	out, err := provider.ReadUnary(ctx, resp.Body)
	if err != nil {
		return nil, err
	}
	if !provider.IsJSONContentType(ct) || !jsoncheck.Valid(out) {
		return nil, translated.BadResponse(resp.StatusCode, "upstream answered 200 with a body that is not JSON")
	}
	if t == nil {
		return &provider.Response{Status: resp.StatusCode, Header: resp.Header, Body: provider.NopBody(out)}, nil
	}
	out, _, err = t.Response(out)
	if err != nil {
		return nil, translated.BadResponse(resp.StatusCode, err.Error())
	}
	return &provider.Response{Status: resp.StatusCode, Header: translated.AnswerHeader(resp.Header, "application/json"), Body: provider.NopBody(out)}, nil
}

// refusal turns a translation refusal into a 400 in OpenAI's shape.
func refusal(err error) error {
	var fe *translate.FieldError
	if errors.As(err, &fe) {
		return provider.StatusError(fe.Status(), nil, fe.OpenAIBody())
	}
	return provider.StatusError(http.StatusBadRequest, nil, translate.OpenAIError(http.StatusBadRequest, err.Error(), "", ""))
}
