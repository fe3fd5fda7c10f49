package provider

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync/atomic"

	"switchboard/internal/config"
	"switchboard/internal/tracing"
)

// Upstream is what every HTTP provider shares: the API root, the rotating
// keys, the config's headers and the one shared client.
type Upstream struct {
	Name   string
	Base   string
	Keys   []string
	Header http.Header
	Client *http.Client
	next   atomic.Uint64
	// bearer holds "Bearer <key>" for each key, made once.
	bearer map[string][]string
}

// NewUpstream reads a provider's config; client is the shared client.
func NewUpstream(c *config.Provider, client *http.Client) *Upstream {
	u := &Upstream{Name: c.Name, Base: strings.TrimRight(c.BaseURL, "/"), Keys: c.Keys(),
		Header: make(http.Header, len(c.Headers)), Client: client}
	for k, v := range c.Headers {
		u.Header.Set(k, v)
	}
	u.bearer = make(map[string][]string, len(u.Keys))
	for _, k := range u.Keys {
		u.bearer[k] = []string{"Bearer " + k}
	}
	return u
}

// Bearer is the Authorization value for key k.
func (u *Upstream) Bearer(k string) []string {
	if v, ok := u.bearer[k]; ok {
		return v
	}
	return []string{"Bearer " + k}
}

// Key is the key of one request: the attempt loop's choice, else the next
// of api_keys in turn.
func (u *Upstream) Key(req *Request) string {
	if req.APIKey != "" {
		return req.APIKey
	}
	switch len(u.Keys) {
	case 0:
		return ""
	case 1:
		return u.Keys[0]
	}
	return u.Keys[(u.next.Add(1)-1)%uint64(len(u.Keys))]
}

// Header values shared by every request: net/http never writes into a
// value slice (Add appends past its length of one, which copies).
var (
	JSONType        = []string{"application/json"}
	eventStreamType = []string{"text/event-stream"}
)

// NewRequest builds the POST of one attempt: the provider's headers under
// the request's, JSON in, JSON or SSE out, and none of the client's own
// credentials (they are for the gateway). The caller sets the key.
func (u *Upstream) NewRequest(ctx context.Context, url string, req *Request, body []byte) (*http.Request, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, &Error{Kind: KindTransport, Msg: "bad upstream url", Err: err}
	}
	h := hr.Header
	for k, v := range u.Header {
		h[k] = v
	}
	for k, v := range req.Header {
		h[k] = v
	}
	h.Del("Authorization")
	h.Del("X-Api-Key")
	h.Del("X-Goog-Api-Key")
	tracing.Inject(ctx, h) // the attempt's span, when traced: the provider's spans join the trace
	h["Content-Type"] = JSONType
	if req.Stream {
		h["Accept"] = eventStreamType
	} else {
		h["Accept"] = JSONType
	}
	return hr, nil
}

// Do sends hr; a failure before any response is classified, and a non-2xx
// answer comes back as its status, headers and bounded body.
func (u *Upstream) Do(ctx context.Context, hr *http.Request) (*http.Response, error) {
	var resp *http.Response
	var err error
	if t := u.Client.Transport; t != nil && hr.URL.User == nil {
		// Straight to the transport, as ReverseProxy does: the client's
		// redirect bookkeeping (a copy of every header per request) buys
		// nothing here, since redirects are never followed.
		resp, err = t.RoundTrip(hr)
	} else {
		// user:pass@ in base_url: the client turns it into Basic auth.
		resp, err = u.Client.Do(hr)
	}
	if err != nil {
		return nil, ClassifyDoError(ctx, err)
	}
	return resp, nil
}
