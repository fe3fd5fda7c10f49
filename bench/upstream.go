package main

import (
	"bytes"
	"flag"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"sync"
	"time"
)

// The fake upstream answers like an OpenAI-compatible server, as cheaply as
// it can: every byte is rendered once at start, a stream only stamps the
// send time into a fixed-width slot of its token event.
//
// Unary: one ~500-byte chat.completion at once. Streaming: a role chunk and
// the first token at once, then max_tokens-1 more tokens every
// bench_interval_us microseconds, a finish chunk with usage, and
// `data: [DONE]`. Each token chunk carries "bench_ts":"<unix ns>", the
// moment it was written, so the load generator can tell how long each chunk
// spent between the upstream and the client.

const (
	benchModel    = "bench-model"
	upstreamModel = "bench-upstream-model"
	tsKey         = `"bench_ts":"`
	tsWidth       = 19 // digits of a Unix time in ns until the year 2286
)

// answerTokens is the unary answer's output; a request allowing fewer gets
// that many instead, as a real provider never reports more than it was
// allowed (the gateway would log and count every such answer as over
// its bound, work no real deployment does per request).
const answerTokens = 36

// unaryAnswerOf is the unary answer reporting n output tokens.
func unaryAnswerOf(n int) []byte {
	return []byte(`{"id":"chatcmpl-bench0000000000000000000","object":"chat.completion","created":1764547200,` +
		`"model":"` + upstreamModel + `","system_fingerprint":"fp_bench","choices":[{"index":0,"message":{"role":"assistant",` +
		`"content":"The quick brown fox jumps over the lazy dog. This is the fixed answer of the benchmark upstream, long enough to look like a short completion."},` +
		`"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":212,"completion_tokens":` + strconv.Itoa(n) +
		`,"total_tokens":` + strconv.Itoa(212+n) + `,` +
		`"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`)
}

var (
	// unaryAnswers[n] reports min(n, answerTokens) output tokens.
	unaryAnswers = func() (a [answerTokens + 1][]byte) {
		for n := range a {
			a[n] = unaryAnswerOf(max(n, 1))
		}
		return a
	}()
	unaryLens = func() (l [answerTokens + 1][]string) {
		for n := range l {
			l[n] = []string{strconv.Itoa(len(unaryAnswers[n]))}
		}
		return l
	}()
	chunkHead  = `data: {"id":"chatcmpl-bench0000000000000000000","object":"chat.completion.chunk","created":1764547200,"model":"` + upstreamModel + `","system_fingerprint":"fp_bench",`
	roleEvent  = []byte(chunkHead + `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	tokenEvent = []byte(chunkHead + `"choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}],` +
		tsKey + "0000000000000000000" + `"}` + "\n\n")
	doneEvent = []byte("data: [DONE]\n\n")

	tsOffset = bytes.Index(tokenEvent, []byte(tsKey)) + len(tsKey)

	hdrJSON   = []string{"application/json"}
	hdrSSE    = []string{"text/event-stream"}
	hdrNoCach = []string{"no-cache"}
)

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

type upstream struct{}

func (upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		w.Header()["Content-Type"] = hdrJSON
		_, _ = w.Write([]byte(`{"status":"ok"}`))
		return
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	_, err := buf.ReadFrom(r.Body)
	body := buf.Bytes()
	stream := err == nil && bytes.Contains(body, []byte(`"stream":true`))
	tokens := int(intField(body, `"max_tokens":`, 16))
	interval := time.Duration(intField(body, `"bench_interval_us":`, 0)) * time.Microsecond
	bodyPool.Put(buf)
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	h := w.Header()
	if !stream {
		n := min(max(tokens, 0), answerTokens)
		h["Content-Type"] = hdrJSON
		h["Content-Length"] = unaryLens[n]
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(unaryAnswers[n])
		return
	}
	h["Content-Type"] = hdrSSE
	h["Cache-Control"] = hdrNoCach
	w.WriteHeader(http.StatusOK)
	f := w.(http.Flusher)
	write := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		f.Flush()
		return true
	}
	tok := make([]byte, len(tokenEvent))
	copy(tok, tokenEvent)
	send := func() bool {
		stamp(tok[tsOffset:tsOffset+tsWidth], time.Now().UnixNano())
		return write(tok)
	}
	if !write(roleEvent) || !send() {
		return
	}
	var tick <-chan time.Time
	if interval > 0 && tokens > 1 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for i := 1; i < tokens; i++ {
		if tick != nil {
			select {
			case <-tick:
			case <-r.Context().Done():
				return
			}
		}
		if !send() {
			return
		}
	}
	// The finish reports the tokens sent, as a provider's would.
	if write(finishEventOf(tokens)) {
		write(doneEvent)
	}
}

// finishEventOf is a stream's last chunk, reporting n output tokens.
func finishEventOf(n int) []byte {
	n = max(n, 1)
	return []byte(chunkHead + `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":212,"completion_tokens":` + strconv.Itoa(n) + `,"total_tokens":` + strconv.Itoa(212+n) + `}}` + "\n\n")
}

// stamp writes n as exactly len(dst) decimal digits.
func stamp(dst []byte, n int64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte('0' + n%10)
		n /= 10
	}
}

// intField reads the integer after key in a JSON body without parsing it.
func intField(body []byte, key string, def int64) int64 {
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return def
	}
	rest := bytes.TrimLeft(body[i+len(key):], " ")
	var n int64
	j := 0
	for ; j < len(rest) && rest[j] >= '0' && rest[j] <= '9'; j++ {
		n = n*10 + int64(rest[j]-'0')
	}
	if j == 0 {
		return def
	}
	return n
}

func upstreamMain(args []string) int {
	fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	return serveChild(*listen, upstream{})
}

// serveChild listens, announces itself on stdout with one JSON line, and
// serves until killed.
func serveChild(listen string, h http.Handler) int {
	soft, hard, _ := raiseNofile(1 << 20)
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		logf("listen: %v", err)
		return 1
	}
	announce(hello{Addr: ln.Addr().String(), Nofile: soft, NofileHard: hard})
	if addr := os.Getenv("BENCH_PPROF"); addr != "" {
		// Profiling a child by hand (e.g. the baseline, to compare with the
		// gateway's --pprof): off unless asked for.
		go func() { logf("pprof: %v", http.ListenAndServe(addr, pprofMux())) }()
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second,
		ErrorLog: quietLog()}
	if err := srv.Serve(ln); err != nil {
		logf("serve: %v", err)
		return 1
	}
	return 0
}

func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
