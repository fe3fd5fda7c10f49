// Package bedrock sends requests to Amazon Bedrock's runtime: chat
// completions through Converse and ConverseStream for any model (the
// internal form translated by translate.OpenAIConverse), and Anthropic
// Messages requests for Claude models through InvokeModel and
// InvokeModelWithResponseStream with their native body (model in the URL,
// anthropic_version bedrock-2023-05-31), so that an Anthropic client keeps
// every field. Streams are AWS event streams (events.go); requests are
// signed with SigV4 or carry a Bedrock API key (auth.go).
package bedrock

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/tidwall/sjson"

	"switchboard/internal/config"
	"switchboard/internal/jsoncheck"
	"switchboard/internal/provider"
	"switchboard/internal/provider/cloud"
	"switchboard/internal/provider/translated"
	"switchboard/internal/translate"
)

// AnthropicVersion is the anthropic_version Bedrock wants in the body.
const AnthropicVersion = "bedrock-2023-05-31"

// NativeEndpoint names the Converse protocol for pricing and estimates.
const NativeEndpoint = "converse"

// Provider is one Bedrock runtime endpoint (a region).
type Provider struct {
	*provider.Upstream
	auth *auth
}

// New builds the provider; client is the shared upstream client.
func New(c *config.Provider, client *http.Client) *Provider {
	return &Provider{Upstream: provider.NewUpstream(c, client), auth: newAuth(c, client)}
}

// Serves implements provider.Limited: chat completions, and Anthropic
// Messages (native for Claude models, else through chat).
func (p *Provider) Serves(ep provider.Endpoint) bool {
	return ep == provider.Chat || ep == provider.Messages
}

// claude: a Claude model id, cross-region inference profile or ARN
// naming one ("us.anthropic.claude-sonnet-4-5-20250929-v1:0").
func claude(model string) bool { return strings.Contains(model, "anthropic.claude") }

// TakesMessages implements provider.MessagesNative: Claude models.
func (p *Provider) TakesMessages(model string) bool { return claude(model) }

// NativeBody implements provider.Natively: a chat request becomes a
// Converse request.
func (p *Provider) NativeBody(req *provider.Request) (string, []byte, bool) {
	if req.Endpoint != provider.Chat {
		return "", nil, false
	}
	t, err := translate.NewOpenAIConverse(req.Body)
	if err != nil {
		return "", nil, false
	}
	req.Prepared = t
	return NativeEndpoint, t.Body(), true
}

// modelPath is the model id as one path segment, escaped as AWS does
// (every byte but the unreserved ones), so that "…-v1:0" and ARNs sign
// and route as the SDKs send them.
func modelPath(model string) string {
	var b strings.Builder
	for i := 0; i < len(model); i++ {
		c := model[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte("0123456789ABCDEF"[c>>4])
		b.WriteByte("0123456789ABCDEF"[c&15])
	}
	return "model/" + b.String()
}

// Send performs one attempt.
func (p *Provider) Send(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	switch {
	case req.Endpoint == provider.Chat:
		return p.converse(ctx, req)
	case req.Endpoint == provider.Messages && claude(req.Model):
		return p.invoke(ctx, req)
	}
	msg := "provider " + p.Name + " (type bedrock) serves chat completions, and Anthropic messages for Claude models, not /v1/" +
		string(req.Endpoint) + " for model " + req.Model
	return nil, provider.StatusError(http.StatusBadRequest, nil, translate.OpenAIError(http.StatusBadRequest, msg, "model", "unsupported_endpoint"))
}

// post sends body to path; a non-2xx answer comes back as an error in
// OpenAI's shape (a throttling or quota one as a 429).
func (p *Provider) post(ctx context.Context, req *provider.Request, path string, body []byte) (*http.Response, error) {
	hr, err := p.NewRequest(ctx, p.URL(path), req, body)
	if err != nil {
		return nil, err
	}
	if req.Stream {
		hr.Header["Accept"] = []string{"application/vnd.amazon.eventstream"}
	}
	// Anthropic's headers are in the body on Bedrock (invokeBody).
	hr.Header.Del("Anthropic-Version")
	hr.Header.Del("Anthropic-Beta")
	if perr := p.auth.apply(ctx, hr, body, p.Key(req)); perr != nil {
		return nil, perr
	}
	resp, err := p.Do(ctx, hr)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return resp, nil
	}
	raw := provider.ReadErrorBody(resp.Body)
	typ := translate.BedrockErrorType(resp.Header.Get("X-Amzn-Errortype"), raw)
	status := translate.BedrockErrorStatus(typ, resp.StatusCode)
	switch typ {
	case "ExpiredTokenException", "UnrecognizedClientException", "InvalidSignatureException":
		p.auth.refused()
	}
	return nil, cloud.Refused(status, resp.Header, translate.BedrockErrorToOpenAI(status, typ, raw))
}

// converse serves a chat request through Converse or ConverseStream.
func (p *Provider) converse(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	t, _ := req.Prepared.(*translate.OpenAIConverse)
	if t == nil {
		var err error
		if t, err = translate.NewOpenAIConverse(req.Body); err != nil {
			var fe *translate.FieldError
			if errors.As(err, &fe) {
				return nil, provider.StatusError(fe.Status(), nil, fe.OpenAIBody())
			}
			return nil, provider.StatusError(http.StatusBadRequest, nil, translate.OpenAIError(http.StatusBadRequest, err.Error(), "", ""))
		}
	}
	path := modelPath(req.Model) + "/converse"
	if req.Stream {
		path += "-stream"
	}
	resp, err := p.post(ctx, req, path, t.Body())
	if err != nil {
		return nil, err
	}
	if req.Stream {
		r := translate.NewEventReader(resp.Body, newEvents(resp.Body, false), t.Stream())
		return translated.OpenStream(ctx, resp, r)
	}
	body, err := p.readJSON(ctx, resp)
	if err != nil {
		return nil, err
	}
	out, _, err := t.Response(body)
	if err != nil {
		return nil, translated.BadResponse(resp.StatusCode, err.Error())
	}
	return &provider.Response{Status: resp.StatusCode, Header: translated.AnswerHeader(resp.Header, "application/json"), Body: provider.NopBody(out)}, nil
}

// invoke sends a native Messages request through InvokeModel or
// InvokeModelWithResponseStream; the answer is Anthropic's, relayed as
// it is (a stream as SSE).
func (p *Provider) invoke(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	body, err := invokeBody(req.Body, req.Header)
	if err != nil {
		return nil, provider.StatusError(http.StatusBadRequest, nil, translate.OpenAIError(http.StatusBadRequest, "the body is not a JSON object", "", ""))
	}
	path := modelPath(req.Model) + "/invoke"
	if req.Stream {
		path += "-with-response-stream"
	}
	resp, err := p.post(ctx, req, path, body)
	if err != nil {
		return nil, err
	}
	if req.Stream {
		return &provider.Response{Status: resp.StatusCode, Header: translated.AnswerHeader(resp.Header, "text/event-stream"),
			Body: &sseBody{src: newEvents(resp.Body, true), body: resp.Body}, Stream: true}, nil
	}
	out, err := p.readJSON(ctx, resp)
	if err != nil {
		return nil, err
	}
	return &provider.Response{Status: resp.StatusCode, Header: resp.Header, Body: provider.NopBody(out)}, nil
}

// invokeBody is a Messages body as InvokeModel takes it: the model in the
// URL, no stream flag (the operation says it), Bedrock's version, and the
// client's anthropic-beta header as the body's anthropic_beta.
func invokeBody(b []byte, h http.Header) ([]byte, error) {
	var err error
	for _, f := range []string{"model", "stream"} {
		if b, err = sjson.DeleteBytes(b, f); err != nil {
			return nil, err
		}
	}
	if b, err = sjson.SetBytes(b, "anthropic_version", AnthropicVersion); err != nil {
		return nil, err
	}
	var betas []string
	for _, v := range h.Values("Anthropic-Beta") {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				betas = append(betas, s)
			}
		}
	}
	if len(betas) > 0 {
		return sjson.SetBytes(b, "anthropic_beta", betas)
	}
	return b, nil
}

// readJSON reads a unary answer that must be JSON.
func (p *Provider) readJSON(ctx context.Context, resp *http.Response) ([]byte, error) {
	body, err := provider.ReadUnarySized(ctx, resp.Body, resp.ContentLength)
	if err != nil {
		return nil, err
	}
	if !provider.IsJSONContentType(resp.Header.Get("Content-Type")) || !jsoncheck.Valid(body) {
		return nil, translated.BadResponse(resp.StatusCode, "upstream answered 200 with a body that is not JSON")
	}
	return body, nil
}

// Compile-time checks of the optional interfaces the attempt loop reads.
var (
	_ provider.Limited        = (*Provider)(nil)
	_ provider.MessagesNative = (*Provider)(nil)
	_ provider.Natively       = (*Provider)(nil)
)
