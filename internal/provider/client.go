package provider

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ClientOptions are the upstream I/O bounds (config timeouts.*).
type ClientOptions struct {
	// Open bounds dial and TLS handshake.
	Open time.Duration
	// Read bounds every wait for upstream bytes: response headers and each
	// chunk of a stream.
	Read time.Duration
	// Write bounds each write of the request.
	Write time.Duration
	// MaxAge retires pooled connections this long after the pool opened
	// them (see Pool); 0 = never.
	MaxAge time.Duration
}

// NewHTTPClient returns the one upstream client the gateway shares: pooled
// per host, HTTP/2 when the upstream offers it, keep-alive, TCP_NODELAY (Go's
// default for TCP), compression accepted. Read and write bounds are applied
// as per-I/O deadlines on the connection, so no per-request timer or
// goroutine is needed. Its Transport is a *Pool, so a reload can change
// the bounds (Pool.Configure) and connections have a maximum age.
func NewHTTPClient(o ClientOptions) *http.Client {
	return &http.Client{
		Transport: NewPool(o),
		// Upstream redirects are not followed: a POST must not silently
		// turn into a GET somewhere else.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// newTransport is one generation of the shared pool.
func newTransport(o ClientOptions) *http.Transport {
	dialer := &net.Dialer{Timeout: o.Open, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &deadlineConn{Conn: c, read: o.Read, write: o.Write}, nil
		},
		ForceAttemptHTTP2:     true,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   o.Open,
		ResponseHeaderTimeout: o.Read,
		ExpectContinueTimeout: time.Second,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       60 * time.Second,
		// Go's 4 KB defaults: a held stream costs one buffer each way, and
		// the SSE reader keeps its own.
	}
	return t
}

// deadlineConn turns "no bytes for d" into a timeout error without any
// timer per request. Arming a deadline costs a runtime timer update, which
// per streamed chunk showed in profiles (3 % of CPU), so a deadline is armed
// at now+d+d/8 and re-armed only once less than d remains: a silent upstream
// times out after between d and 1.125·d, never sooner than configured.
//
// A write re-arms the read deadline too: the transport keeps a read pending
// on an idle pooled connection, armed when the last answer ended, so a new
// request's wait for its answer must be measured from its own send, not
// from that read's start (else it times out early and is sent twice).
type deadlineConn struct {
	net.Conn
	read, write time.Duration
	// current deadlines in Unix ns (0: none armed); the transport reads
	// and writes from different goroutines.
	readLeft, writeLeft atomic.Int64
}

func (c *deadlineConn) armRead(now time.Time) {
	d := now.Add(c.read + c.read/8)
	c.readLeft.Store(d.UnixNano())
	_ = c.Conn.SetReadDeadline(d)
}

func (c *deadlineConn) armWrite(now time.Time) {
	d := now.Add(c.write + c.write/8)
	c.writeLeft.Store(d.UnixNano())
	_ = c.Conn.SetWriteDeadline(d)
}

func (c *deadlineConn) Read(b []byte) (int, error) {
	if c.read > 0 {
		if now := time.Now(); c.readLeft.Load()-now.UnixNano() < int64(c.read) {
			c.armRead(now)
		}
	}
	return c.Conn.Read(b)
}

func (c *deadlineConn) Write(b []byte) (int, error) {
	now := time.Now()
	if c.write > 0 && c.writeLeft.Load()-now.UnixNano() < int64(c.write) {
		c.armWrite(now)
	}
	if c.read > 0 && c.readLeft.Load()-now.UnixNano() < int64(c.read) {
		c.armRead(now)
	}
	return c.Conn.Write(b)
}

// Prewarm opens a connection to each origin in the background by sending a
// bounded HEAD request; failures are ignored since real requests decide.
func Prewarm(client *http.Client, origins []string, timeout time.Duration) {
	var wg sync.WaitGroup
	for _, o := range origins {
		wg.Add(1)
		go func(o string) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodHead, o, nil)
			if err != nil {
				return
			}
			if resp, err := client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
			}
		}(o)
	}
	wg.Wait()
}

// ReadErrorBody reads at most MaxErrorBody bytes of an error answer and
// closes it.
func ReadErrorBody(body io.ReadCloser) []byte {
	defer body.Close()
	b, _ := io.ReadAll(io.LimitReader(body, MaxErrorBody))
	return b
}

// maxPrealloc bounds what a declared length reserves before its bytes come.
const maxPrealloc = 1 << 20

// MaxUnaryBody bounds a buffered (non-streamed) upstream answer.
const MaxUnaryBody = 32 << 20

// ReadUnary reads a whole unary answer, bounded by MaxUnaryBody. A
// Buffered body is returned as is.
func ReadUnary(ctx context.Context, body io.ReadCloser) ([]byte, error) {
	return ReadUnarySized(ctx, body, -1)
}

// ReadUnarySized is ReadUnary knowing the answer's Content-Length (-1 when
// unknown), so that a declared length is read into one exact buffer. The
// buffers are reserved in the Hold of ctx (WithHold), if any.
func ReadUnarySized(ctx context.Context, body io.ReadCloser, size int64) ([]byte, error) {
	if b, ok := body.(*Buffered); ok {
		out, _ := b.Bytes()
		return out, nil
	}
	defer body.Close()
	if size > MaxUnaryBody {
		return nil, &Error{Kind: KindBadResponse, Msg: "upstream answer larger than 32 MiB"}
	}
	b, err := readBounded(body, size, MaxUnaryBody, holdOf(ctx))
	if err != nil {
		return nil, TransportError(ctx, err)
	}
	if len(b) > MaxUnaryBody {
		return nil, &Error{Kind: KindBadResponse, Msg: "upstream answer larger than 32 MiB"}
	}
	return b, nil
}

// ReadAllSized reads r to its end. With size ≥ 0 (a declared length) it
// allocates once, exactly, up to 1 MiB: a declared length is a claim, and
// a client declaring 10 MB and sending nothing must not get 10 MB reserved
// per connection, so larger bodies grow as their bytes arrive. A reader
// that disagrees with its size is still read whole.
func ReadAllSized(r io.Reader, size int64) ([]byte, error) {
	if size < 0 {
		return io.ReadAll(r)
	}
	// One byte of room to see EOF without growing.
	b := make([]byte, 0, min(size, maxPrealloc)+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // longer than declared: let append grow it
		}
	}
}

// ClassifyDoError turns an http.Client.Do failure into *Error. An EOF before
// any response byte on a pooled connection is KindStaleConn: the server
// closed an idle keep-alive connection as we reused it.
func ClassifyDoError(ctx context.Context, err error) *Error {
	if ctx.Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "server closed idle connection")) {
		return &Error{Kind: KindStaleConn, Msg: "connection closed before response", Err: err}
	}
	return TransportError(ctx, err)
}

// IsJSONContentType reports whether a Content-Type names JSON (or is absent,
// which many self-hosted servers do).
func IsJSONContentType(ct string) bool {
	if ct == "" {
		return true
	}
	ct = strings.ToLower(ct)
	return strings.Contains(ct, "json")
}

// IsEventStream reports whether a Content-Type is text/event-stream.
func IsEventStream(ct string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "text/event-stream")
}

// NopBody wraps a buffered answer as a Response body.
func NopBody(b []byte) io.ReadCloser { return &Buffered{Reader: bytes.NewReader(b), b: b} }

// JSONBody wraps a buffered answer already checked to be JSON, so the
// attempt loop neither copies nor re-validates it.
func JSONBody(b []byte) io.ReadCloser { return &Buffered{Reader: bytes.NewReader(b), b: b, json: true} }

// Buffered is a whole answer held in memory.
type Buffered struct {
	*bytes.Reader
	b    []byte
	json bool
}

// Close implements io.Closer.
func (*Buffered) Close() error { return nil }

// Bytes returns the whole answer and whether it is known to be JSON.
func (b *Buffered) Bytes() ([]byte, bool) { return b.b, b.json }
