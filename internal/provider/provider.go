// Package provider defines what an upstream LLM provider is to the gateway:
// one Send per attempt, an OpenAI-shaped answer, and a typed error that the
// attempt loop classifies without string matching.
package provider

import (
	"context"
	"io"
	"net/http"
)

// Endpoint is an OpenAI API operation, named by its path under /v1.
type Endpoint string

const (
	Chat        Endpoint = "chat/completions"
	Completions Endpoint = "completions"
	Responses   Endpoint = "responses"
	Embeddings  Endpoint = "embeddings"
	// Messages is Anthropic's Messages API, used when an Anthropic client's
	// request goes to an Anthropic provider untranslated.
	Messages Endpoint = "messages"
	// MessagesCountTokens is Anthropic's token count
	// (/v1/messages/count_tokens), passed through.
	MessagesCountTokens Endpoint = "messages/count_tokens"
	// GenerateContent is Gemini's generateContent (streamGenerateContent
	// when the request streams), used when a Gemini client's request goes
	// to a gemini provider untranslated; the model is in the URL.
	GenerateContent Endpoint = "generateContent"
	// CountTokens is Gemini's countTokens, passed through.
	CountTokens Endpoint = "countTokens"
)

// Limited is a provider that serves only some endpoints (the translating
// types); a provider without the method serves every endpoint.
type Limited interface {
	Serves(ep Endpoint) bool
}

// Serves reports whether p can serve ep.
func Serves(p Provider, ep Endpoint) bool {
	l, ok := p.(Limited)
	return !ok || l.Serves(ep)
}

// MessagesNative is implemented by providers that take an Anthropic
// Messages body untranslated for some of their models (the clouds, for
// Claude); an anthropic provider takes it for all.
type MessagesNative interface {
	TakesMessages(model string) bool
}

// TakesMessages reports whether p takes a native Messages body for model.
func TakesMessages(p Provider, model string) bool {
	m, ok := p.(MessagesNative)
	return ok && m.TakesMessages(model)
}

// Request is one attempt's input. Body is an OpenAI-shaped request whose
// "model" already names the provider's model; providers that speak another
// protocol translate it. A Request is never mutated by Send, so the attempt
// loop may send it again.
type Request struct {
	Endpoint Endpoint
	Body     []byte
	Stream   bool
	// Model is the provider's model name (already written into Body).
	Model string
	// Header holds client headers to forward (already filtered) and the
	// model entry's headers; provider headers go under them.
	Header http.Header
	// APIKey is the key chosen for this attempt ("" = the provider's own
	// rotation); KeyIndex is its position in the provider's keys.
	APIKey   string
	KeyIndex int
	// Prepared is what a translating provider made of Body for
	// NativeBody (its translator), reused by Send so that a request is
	// translated once; nil until then.
	Prepared any
}

// Natively is implemented by providers that translate a request into
// another protocol. NativeBody returns the body they will send upstream
// for req and that protocol's endpoint name, so that admission estimates
// tokens and prices what the provider actually receives; ok is false when
// the request goes out as it is (or cannot be translated: Send then
// refuses it). It may set req.Prepared for Send to reuse.
type Natively interface {
	NativeBody(req *Request) (endpoint string, body []byte, ok bool)
}

// Response is a successful (2xx) upstream answer in OpenAI shape. Body is a
// JSON document, or an SSE stream when Stream is true. The caller closes Body.
type Response struct {
	Status int
	Header http.Header
	Body   io.ReadCloser
	Stream bool
}

// Provider sends requests to one upstream. Implementations are safe for
// concurrent use and hold no per-request state.
type Provider interface {
	// Send performs one attempt. A non-2xx answer, a transport failure or an
	// unusable answer is returned as *Error.
	Send(ctx context.Context, req *Request) (*Response, error)
}
