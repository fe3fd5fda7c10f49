// Package vertex sends requests to Google Vertex AI, which serves two
// protocols on one host, chosen by the route's model:
//
//	gemini-*  the Gemini API: .../publishers/google/models/{m}:generateContent
//	          (:streamGenerateContent?alt=sse), translated as for type gemini
//	claude-*  Anthropic's Messages API: .../publishers/anthropic/models/{m}:rawPredict
//	          (:streamRawPredict), the model in the URL, not the body, and
//	          anthropic_version vertex-2023-10-16; a native Messages request
//	          (an Anthropic client) goes untranslated
//
// under {base_url}/v1/projects/{project}/locations/{location}. Requests
// carry a Google OAuth token (credentials.go).
package vertex

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/tidwall/sjson"

	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/provider"
	"switchboard/internal/provider/anthropic"
	"switchboard/internal/provider/bearer"
	"switchboard/internal/provider/cloud"
	"switchboard/internal/provider/gemini"
	"switchboard/internal/translate"
)

// AnthropicVersion is the anthropic_version Vertex AI wants in the body.
const AnthropicVersion = "vertex-2023-10-16"

// Provider is one Vertex AI project and location.
type Provider struct {
	*provider.Upstream
	// root is the path of the publishers under base_url.
	root  string
	token *bearer.Cache
}

// New builds the provider; client is the shared upstream client, clk the
// clock token expiry is read from (nil = real).
func New(c *config.Provider, client *http.Client, clk clock.Clock) *Provider {
	return &Provider{Upstream: provider.NewUpstream(c, client),
		root:  "v1/projects/" + url.PathEscape(c.Project) + "/locations/" + url.PathEscape(c.Location) + "/publishers/",
		token: bearer.New(tokenFetch(c.CredentialsFile, client), clk)}
}

// family is the publisher of a model by its name ("" when Vertex AI
// serves it through neither protocol here). A "publishers/x/models/"
// or "x/" prefix is allowed.
func family(model string) (publisher, name string) {
	name = model[strings.LastIndexByte(model, '/')+1:]
	switch {
	case strings.HasPrefix(name, "gemini"):
		return "google", name
	case strings.HasPrefix(name, "claude"):
		return "anthropic", name
	}
	return "", name
}

// Serves implements provider.Limited: chat completions, and Anthropic
// Messages (untranslated for Claude models, else through chat).
func (p *Provider) Serves(ep provider.Endpoint) bool {
	return ep == provider.Chat || ep == provider.Messages
}

// TakesMessages implements provider.MessagesNative: Claude models.
func (p *Provider) TakesMessages(model string) bool {
	pub, _ := family(model)
	return pub == "anthropic"
}

// NativeBody implements provider.Natively: what a chat request becomes.
func (p *Provider) NativeBody(req *provider.Request) (string, []byte, bool) {
	if req.Endpoint != provider.Chat {
		return "", nil, false
	}
	switch pub, _ := family(req.Model); pub {
	case "google":
		t, err := translate.NewOpenAIGemini(req.Body)
		if err != nil {
			return "", nil, false
		}
		req.Prepared = t
		return gemini.NativeEndpoint, t.Body(), true
	case "anthropic":
		t, err := translate.NewOpenAIAnthropic(req.Body)
		if err != nil {
			return "", nil, false
		}
		body, err := messagesBody(t.Body())
		if err != nil {
			return "", nil, false
		}
		req.Prepared = t
		return string(provider.Messages), body, true
	}
	return "", nil, false
}

// messagesBody is an Anthropic Messages body as Vertex AI takes it.
func messagesBody(b []byte) ([]byte, error) {
	b, err := sjson.DeleteBytes(b, "model")
	if err != nil {
		return nil, err
	}
	return sjson.SetBytes(b, "anthropic_version", AnthropicVersion)
}

// Send performs one attempt.
func (p *Provider) Send(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	pub, name := family(req.Model)
	if !p.Serves(req.Endpoint) || pub == "" || req.Endpoint == provider.Messages && pub != "anthropic" {
		msg := "provider " + p.Name + " (type vertex) serves chat completions and Anthropic messages for gemini-* and claude-* models, not /v1/" +
			string(req.Endpoint) + " for model " + req.Model
		return nil, provider.StatusError(http.StatusBadRequest, nil,
			translate.OpenAIError(http.StatusBadRequest, msg, "model", "unsupported_endpoint"))
	}
	token, err := p.token.Get(ctx, cloud.OpenTimeout(p.Client))
	if err != nil {
		status, reason := googleFailure(err)
		return nil, cloud.CredentialError(ctx, p.Name, "Google Cloud", status, reason, err)
	}
	auth := func(hr *http.Request) {
		hr.Header.Del("Anthropic-Version") // the body carries Vertex AI's own
		hr.Header["Authorization"] = []string{"Bearer " + token}
	}
	path := p.root + pub + "/models/" + url.PathEscape(name)
	var resp *provider.Response
	switch {
	case pub == "google":
		var t *translate.OpenAIGemini
		if t, err = gemini.Translator(req); err != nil {
			return nil, err
		}
		if req.Stream {
			path += ":streamGenerateContent?alt=sse"
		} else {
			path += ":generateContent"
		}
		resp, err = gemini.Exchange(ctx, p.Upstream, req, p.URL(path), t, auth)
	default:
		if req.Stream {
			path += ":streamRawPredict"
		} else {
			path += ":rawPredict"
		}
		var t *translate.OpenAIAnthropic
		body := req.Body
		if req.Endpoint == provider.Chat {
			if t, err = anthropic.Translator(req); err != nil {
				return nil, err
			}
			body = t.Body()
		}
		if body, err = messagesBody(body); err != nil {
			return nil, provider.StatusError(http.StatusBadRequest, nil, translate.OpenAIError(http.StatusBadRequest, "the body is not a JSON object", "", ""))
		}
		resp, err = anthropic.Exchange(ctx, p.Upstream, req, p.URL(path), body, t, auth)
	}
	return resp, p.refused(err, token)
}

// refused gives a 401 or 403 the cloud's reason, and drops the token the
// cloud refused so that the next attempt gets a fresh one.
func (p *Provider) refused(err error, token string) error {
	pe, ok := err.(*provider.Error)
	if !ok || pe.Kind != provider.KindHTTP || pe.Status != http.StatusUnauthorized && pe.Status != http.StatusForbidden {
		return err
	}
	if pe.Status == http.StatusUnauthorized {
		p.token.Drop(token)
	}
	return cloud.Refused(pe.Status, pe.Header, pe.Body)
}
