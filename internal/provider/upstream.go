package provider

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/propagation"

	"switchboard/internal/config"
)

// Upstream is what every HTTP provider shares: the API root, the rotating
// keys, the config's headers and the one shared client.
type Upstream struct {
	Name string
	// Base is the API root without a trailing slash and without the query
	// base_url may carry (Azure's ?api-version=...), which is in query.
	Base   string
	query  string
	Keys   []string
	Header http.Header
	Client *http.Client
	next   atomic.Uint64
	// bearer holds "Bearer <key>" for each key, made once.
	bearer map[string][]string
}

// NewUpstream reads a provider's config; client is the shared client.
func NewUpstream(c *config.Provider, client *http.Client) *Upstream {
	base, query, _ := strings.Cut(c.BaseURL, "?")
	u := &Upstream{Name: c.Name, Base: strings.TrimRight(base, "/"), query: query, Keys: c.Keys(),
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

// URL is the address of path (which may carry a query of its own, as
// ":streamGenerateContent?alt=sse" does) under the API root: base_url's
// path, then path, then base_url's query and path's joined. A base_url
// with a query is thus joined as a path plus that query, not with the
// endpoint inside the query.
func (u *Upstream) URL(path string) string {
	return JoinURL(u.Base, u.query, path)
}

// JoinURL joins base (no query, no trailing slash), its raw query and path
// (without a leading slash, possibly with a query) as URL does.
func JoinURL(base, query, path string) string {
	p, pq, _ := strings.Cut(path, "?")
	sep := ""
	if p != "" && !strings.HasPrefix(p, "/") {
		sep = "/"
	}
	// One concatenation each: one allocation per request, not two.
	switch {
	case query != "" && pq != "":
		return base + sep + p + "?" + query + "&" + pq
	case query != "":
		return base + sep + p + "?" + query
	case pq != "":
		return base + sep + p + "?" + pq
	}
	return base + sep + p
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
	// The attempt's span, when traced (W3C trace context only, nothing
	// without a span): the provider's spans join the trace. otel's
	// propagator directly, not package tracing, keeps provider low.
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
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
