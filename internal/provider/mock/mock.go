// Package mock is Switchboard's built-in simulated upstream. It answers every
// OpenAI endpoint in wire shape without touching the network, with
// configurable pacing (TTFT, tokens per second) and faults (error statuses,
// hangs, cut streams, garbage), and a per-request fault script for tests.
package mock

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/config"
	"switchboard/internal/jsoncheck"
	"switchboard/internal/provider"
)

// DefaultTokens is the completion length when config.Mock.Tokens is 0.
const DefaultTokens = 16

// FailureBody is the error body of a simulated failure.
var FailureBody = []byte(`{"error":{"message":"mock failure","type":"server_error","code":"mock_failure"}}`)

// errConnReset is what a Transport fault fails with, as a dropped
// connection would.
var errConnReset = errors.New("mock: connection reset by peer")

// Fault scripts the outcome of one Send. The zero Fault answers normally
// (still paced by the config's ttft_ms and tokens_per_second). When several
// fields are set, Hang wins over Transport, which wins over an error Status.
type Fault struct {
	// Status >= 300 fails with a *provider.Error of KindHTTP carrying Header
	// and Body (FailureBody when nil). A 2xx Status answers with that status.
	Status int
	// Header is sent with the error, or added to a successful answer.
	Header http.Header
	// Body, on a successful answer, replaces the generated one verbatim
	// (raw SSE bytes when streaming).
	Body []byte
	// Hang blocks Send until ctx is done.
	Hang bool
	// CutAfter ends a stream with io.ErrUnexpectedEOF after this many
	// content chunks; 0 = never. With Garbage, it is where the broken line
	// goes instead.
	CutAfter int
	// TTFT overrides the config's ttft_ms for this request (0 = config's).
	TTFT time.Duration
	// Transport fails Send as a connection failure (KindTransport).
	Transport bool
	// Garbage answers 200 with an HTML body (unary), or a stream whose
	// event after CutAfter content chunks is a broken SSE line, after which
	// the stream ends.
	Garbage bool
}

// Provider is a simulated upstream. It is safe for concurrent use.
type Provider struct {
	name       string
	opts       config.Mock
	tokens     int
	failStatus int
	failHeader http.Header
	ttft       time.Duration
	gap        time.Duration // between streamed tokens; 0 = no wait

	calls atomic.Int64

	mu     sync.Mutex
	script []Fault
}

var _ provider.Provider = (*Provider)(nil)

// New returns a mock provider named name (the name appears in the generated
// text, so tests can tell which provider answered).
func New(name string, opts config.Mock) *Provider {
	p := &Provider{name: name, opts: opts, tokens: opts.Tokens, failStatus: opts.FailStatus}
	if p.tokens <= 0 {
		p.tokens = DefaultTokens
	}
	if p.failStatus < 300 || p.failStatus > 599 {
		p.failStatus = http.StatusInternalServerError
	}
	p.failHeader = http.Header{}
	for k, v := range opts.FailHeaders {
		p.failHeader.Set(k, v)
	}
	if opts.TTFTMs > 0 {
		p.ttft = time.Duration(opts.TTFTMs) * time.Millisecond
	}
	if opts.TokensPerSecond > 0 {
		p.gap = time.Duration(float64(time.Second) / opts.TokensPerSecond)
	}
	return p
}

// Name is the provider's name as given to New.
func (p *Provider) Name() string { return p.name }

// Script appends faults to a FIFO queue; each Send consumes one, ahead of
// the config's faults.
func (p *Provider) Script(f ...Fault) {
	p.mu.Lock()
	p.script = append(p.script, f...)
	p.mu.Unlock()
}

// Calls reports how many times Send was called.
func (p *Provider) Calls() int64 { return p.calls.Load() }

func (p *Provider) next() (Fault, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.script) == 0 {
		return Fault{}, false
	}
	f := p.script[0]
	p.script[0] = Fault{} // drop references held by the backing array
	p.script = p.script[1:]
	return f, true
}

// configFault turns the config's fault options into the n-th call's Fault.
func (p *Provider) configFault(n int64) Fault {
	o := p.opts
	if n <= int64(o.FailFirst) || (o.FailRate > 0 && rand.Float64() < o.FailRate) {
		return Fault{Status: p.failStatus, Header: p.failHeader}
	}
	return Fault{Hang: o.Hang, CutAfter: o.CutAfterChunks}
}

// Send simulates one upstream attempt.
func (p *Provider) Send(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	n := p.calls.Add(1)
	f, ok := p.next()
	if !ok {
		f = p.configFault(n)
	}
	if err := ctx.Err(); err != nil {
		return nil, provider.TransportError(ctx, err)
	}
	switch {
	case f.Hang:
		<-ctx.Done()
		return nil, provider.TransportError(ctx, ctx.Err())
	case f.Transport:
		return nil, provider.TransportError(ctx, errConnReset)
	case f.Status >= 300:
		return nil, failure(f.Status, f.Header, f.Body)
	}

	j, perr := p.newJob(n, req, f)
	if perr != nil {
		return nil, perr
	}
	if j.stream {
		return j.startStream(ctx), nil
	}
	return j.unary(ctx)
}

func failure(status int, h http.Header, body []byte) *provider.Error {
	h = h.Clone()
	if h == nil {
		h = http.Header{}
	}
	if body == nil {
		body = FailureBody
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	return provider.StatusError(status, h, bytes.Clone(body))
}

// invalid is a 4xx in OpenAI's error shape, for requests a real upstream
// would reject before generating anything.
func invalid(status int, msg string) *provider.Error {
	b, _ := jsonMarshal(map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": nil, "code": nil,
	}})
	return failure(status, nil, b)
}

// job is one request's answer plan.
type job struct {
	p        *Provider
	endpoint provider.Endpoint
	body     gjson.Result
	num      int64
	model    string
	created  int64
	tokens   int    // completion tokens to produce
	finish   string // "stop" or "length"
	prompt   int    // prompt tokens
	usage    bool   // stream_options.include_usage
	stream   bool
	ttft     time.Duration
	gap      time.Duration
	status   int
	header   http.Header
	raw      []byte // verbatim answer from a Fault
	cut      int
	garbage  bool
}

func (p *Provider) newJob(n int64, req *provider.Request, f Fault) (*job, *provider.Error) {
	switch req.Endpoint {
	case provider.Chat, provider.Completions, provider.Responses, provider.Embeddings:
	default:
		return nil, invalid(http.StatusNotFound, "mock: unknown endpoint "+strconv.Quote(string(req.Endpoint)))
	}
	if !jsoncheck.Valid(req.Body) {
		return nil, invalid(http.StatusBadRequest, "We could not parse the JSON body of your request.")
	}
	body := gjson.ParseBytes(req.Body)
	j := &job{
		p: p, endpoint: req.Endpoint, body: body, num: n,
		model:   body.Get("model").String(),
		created: time.Now().Unix(),
		tokens:  p.tokens, finish: "stop",
		usage:  body.Get("stream_options.include_usage").Bool(),
		stream: req.Stream && req.Endpoint != provider.Embeddings, // embeddings never stream
		ttft:   p.ttft, gap: p.gap,
		status: http.StatusOK, header: f.Header.Clone(), raw: f.Body,
		cut: f.CutAfter, garbage: f.Garbage,
	}
	if j.model == "" {
		j.model = req.Model
	}
	if j.model == "" {
		j.model = "mock"
	}
	if f.TTFT > 0 {
		j.ttft = f.TTFT
	}
	if f.Status >= 200 {
		j.status = f.Status
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		if m := body.Get(k).Int(); m > 0 && m < int64(j.tokens) {
			j.tokens, j.finish = int(m), "length"
		}
	}
	var in gjson.Result
	switch req.Endpoint {
	case provider.Chat:
		in = body.Get("messages")
	case provider.Completions:
		in = body.Get("prompt")
	default:
		in = body.Get("input")
	}
	if req.Endpoint == provider.Embeddings && !in.Exists() {
		return nil, invalid(http.StatusBadRequest, "'input' is a required property")
	}
	j.prompt = max(1, len(in.Raw)/4)
	return j, nil
}

// token is the i-th (1-based) completion token; the first names the
// provider so tests can tell who answered.
func (j *job) token(i int) string {
	if i == 1 {
		return "Hello from " + j.p.name + "!"
	}
	return " token " + strconv.Itoa(i)
}

func (j *job) text() string {
	var b bytes.Buffer
	for i := 1; i <= j.tokens; i++ {
		b.WriteString(j.token(i))
	}
	return b.String()
}

func (j *job) unary(ctx context.Context) (*provider.Response, error) {
	wait := j.ttft
	if j.endpoint != provider.Embeddings {
		wait += time.Duration(j.tokens) * j.gap
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, provider.TransportError(ctx, ctx.Err())
		case <-t.C:
		}
	}
	ctype := "application/json"
	var b []byte
	switch {
	case j.garbage:
		ctype = "text/html; charset=utf-8"
		b = []byte("<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>\n")
	case j.raw != nil:
		b = bytes.Clone(j.raw)
	default:
		var err error
		if b, err = j.unaryBody(); err != nil {
			return nil, &provider.Error{Kind: provider.KindBadResponse, Msg: "mock: encoding answer", Err: err}
		}
	}
	h := j.respHeader(ctype)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	return &provider.Response{Status: j.status, Header: h, Body: io.NopCloser(bytes.NewReader(b))}, nil
}

func (j *job) respHeader(ctype string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", ctype)
	for k, v := range j.header {
		h[k] = v
	}
	return h
}
