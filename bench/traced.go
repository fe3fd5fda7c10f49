package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Traced modes run the gateway with tracing on (tracing.sample_ratio 1:
// every request a server span and a span per attempt) exporting OTLP/HTTP
// to a sink in the harness process, which reads and discards each
// export. Paired with the same mode untraced, the ratio of their
// gateway/baseline throughputs is tracing's cost (see checks).

// otlpSink is the collector the traced gateway exports to.
type otlpSink struct {
	url            string
	exports, bytes atomic.Int64
	srv            *http.Server
}

// startSink serves on loopback until the harness ends.
func startSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{url: "http://" + ln.Addr().String()}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, ErrorLog: quietLog(),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := io.Copy(io.Discard, r.Body)
			s.exports.Add(1)
			s.bytes.Add(n)
			// An empty ExportTraceServiceResponse is zero bytes of protobuf.
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(http.StatusOK)
		})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// tracingConfig is the gateway config's tracing section for the sink.
func tracingConfig(sink string) string {
	return "tracing:\n  enabled: true\n  endpoint: " + sink + "\n  sample_ratio: 1\n"
}

// traceStats reads the gateway's span counters (exported, dropped,
// failed) from its /metrics, for the mode's result.
func (h *harness) traceStats() map[string]float64 {
	req, _ := http.NewRequest(http.MethodGet, "http://"+h.gw.addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, `switchboard_trace_spans_total{outcome="`)
		if !ok {
			continue
		}
		name, val, ok := strings.Cut(rest, `"} `)
		if v, err := strconv.ParseFloat(val, 64); ok && err == nil {
			out[name] = v
		}
	}
	if h.sink != nil {
		out["sink_exports"], out["sink_bytes"] = float64(h.sink.exports.Load()), float64(h.sink.bytes.Load())
	}
	return out
}

// traceLine is the progress line of a traced mode's span counters.
func traceLine(name string, st map[string]float64) string {
	return fmt.Sprintf("%-16s spans exported %.0f, dropped %.0f, failed %.0f (the sink took %.0f exports, %.1f MB)",
		name, st["exported"], st["dropped"], st["failed"], st["sink_exports"], st["sink_bytes"]/1e6)
}
