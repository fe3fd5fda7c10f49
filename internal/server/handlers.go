package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/config"
	"switchboard/internal/provider"
	"switchboard/internal/proxy"
	"switchboard/internal/route"
)

// Handler returns the gateway's routes behind its middleware.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", s.get(s.handleHealth))
	mux.HandleFunc("/ready", s.get(s.handleReady))
	mux.HandleFunc("/metrics", s.get(s.handleMetrics))
	mux.HandleFunc("/v1/models", s.get(s.handleModels))
	mux.HandleFunc("/v1/models/{name...}", s.get(s.handleModel))
	mux.HandleFunc("/v1/chat/completions", s.inference(provider.Chat))
	mux.HandleFunc("/v1/completions", s.inference(provider.Completions))
	mux.HandleFunc("/v1/responses", s.inference(provider.Responses))
	mux.HandleFunc("/v1/embeddings", s.inference(provider.Embeddings))
	mux.HandleFunc("/v1/messages", s.handleMessages)
	mux.HandleFunc("/v1/health/detail", s.get(s.handleHealthDetail))
	mux.HandleFunc("/dashboard", s.get(s.handleDashboard))
	mux.HandleFunc("/dashboard/data", s.get(s.handleDashboardData))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, protocolOf(r), &apiError{Status: http.StatusNotFound, Type: "invalid_request_error",
			Code: "not_found", Message: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
	})
	return s.wrap(mux)
}

// get allows GET and HEAD only.
func (s *Server) get(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, r, "GET, HEAD")
			return
		}
		h(w, r)
	}
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, protocolOf(r), &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
		Code: "method_not_allowed", Message: fmt.Sprintf("method %s is not allowed on %s; use %s", r.Method, r.URL.Path, allow)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, OpenAI, &apiError{Status: 500, Type: "server_error", Message: "cannot encode response"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleMetrics serves Prometheus metrics, behind auth.metrics_token when set.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if snap := s.snap.Load(); snap != nil && snap.metricsHash != nil {
		if k := presentedKey(r); k == "" || !checkToken(k, snap.metricsHash) {
			writeError(w, OpenAI, &apiError{Status: http.StatusUnauthorized, Type: "authentication_error",
				Code: "invalid_api_key", Message: "metrics require auth.metrics_token as a Bearer token"})
			return
		}
	}
	s.Metrics.Handler().ServeHTTP(w, r)
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if !s.Ready() {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_ready"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// entry guards /v1 handlers: a loaded config, not draining, authenticated.
func (s *Server) entry(w http.ResponseWriter, r *http.Request) *Snapshot {
	snap := s.snap.Load()
	if snap == nil || s.draining.Load() {
		writeError(w, protocolOf(r), &apiError{Status: http.StatusServiceUnavailable, Type: "server_error",
			Code: "unavailable", Message: "the gateway is starting or shutting down", RetryAfter: time.Second})
		return nil
	}
	if !s.authed(w, r, snap) {
		return nil
	}
	return snap
}

type modelObject struct {
	ID            string          `json:"id"`
	Object        string          `json:"object"`
	Created       int64           `json:"created"`
	OwnedBy       string          `json:"owned_by"`
	ContextLength int             `json:"context_length,omitempty"`
	Providers     []modelProvider `json:"providers,omitempty"`
}

type modelProvider struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Type     string `json:"type"`
	Primary  bool   `json:"primary"`
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	snap := s.entry(w, r)
	if snap == nil {
		return
	}
	data := make([]modelObject, 0, len(snap.Config.Models))
	for _, m := range snap.Config.Models {
		data = append(data, modelObject{ID: m.Name, Object: "model", OwnedBy: "switchboard", ContextLength: m.ContextLength})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	snap := s.entry(w, r)
	if snap == nil {
		return
	}
	name := r.PathValue("name")
	rt := snap.Routes.Lookup(name)
	if rt == nil {
		writeError(w, OpenAI, modelNotFound(name))
		return
	}
	mo := modelObject{ID: name, Object: "model", OwnedBy: "switchboard", ContextLength: rt.Model.ContextLength}
	for i, c := range rt.Candidates {
		mo.Providers = append(mo.Providers, modelProvider{Provider: c.Provider, Model: c.Model, Type: c.Type, Primary: i == rt.Primary})
	}
	writeJSON(w, http.StatusOK, mo)
}

func modelNotFound(name string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found", Param: "model",
		Message: fmt.Sprintf("The model %q does not exist; GET /v1/models lists the configured models", name)}
}

// readBody reads the whole request body within the configured limit. The
// body is read before anything is sent upstream: Go's HTTP/1 server closes
// an unread request body once response headers go out, which can tear down
// a fast upstream stream mid-way (golang/go#40747).
func readBody(r *http.Request, w http.ResponseWriter, limit int64) ([]byte, *apiError) {
	if limit <= 0 {
		limit = 10 << 20
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, tooLarge(limit)
		}
		return nil, errInvalid("could not read the request body: " + err.Error())
	}
	return buf.Bytes(), nil
}

func tooLarge(limit int64) *apiError {
	return &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
		Message: fmt.Sprintf("request body is larger than limits.max_request_body (%d bytes)", limit)}
}

// inspectBody validates the JSON envelope and reads model and stream. A
// duplicate top-level key is refused: parsers disagree on which copy wins,
// so routing, billing and the upstream could each see another model.
func inspectBody(body []byte) (model string, stream bool, e *apiError) {
	if !gjson.ValidBytes(body) {
		var v json.RawMessage
		err := json.Unmarshal(body, &v)
		msg := "request body is not valid JSON"
		if err != nil {
			msg += ": " + err.Error()
		}
		return "", false, errInvalid(msg)
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return "", false, errInvalid("request body must be a JSON object")
	}
	var seen [16]string
	keys := seen[:0]
	root.ForEach(func(k, v gjson.Result) bool {
		for _, s := range keys {
			if s == k.Str {
				e = errInvalid(fmt.Sprintf("duplicate key %q in the request body", k.Str))
				e.Param = k.Str
				return false
			}
		}
		keys = append(keys, k.Str)
		switch k.Str {
		case "model":
			if v.Type == gjson.String {
				model = v.Str
			}
		case "stream":
			stream = v.Type == gjson.True
		}
		return true
	})
	if e != nil {
		return "", false, e
	}
	if model == "" {
		e = errInvalid("missing required field \"model\" (a non-empty string)")
		e.Param = "model"
		return "", false, e
	}
	return model, stream, nil
}

// forwarded are the client headers passed upstream; everything else
// (notably the client's own Authorization and x-api-key) stays here.
var forwarded = []string{"OpenAI-Organization", "OpenAI-Beta", "OpenAI-Project", "Anthropic-Beta"}

func forwardHeaders(r *http.Request) http.Header {
	var h http.Header
	for _, k := range forwarded {
		if v := r.Header.Values(k); len(v) > 0 {
			if h == nil {
				h = make(http.Header, 2)
			}
			h[k] = v
		}
	}
	return h
}

// options are the loop parameters of one request.
func options(cfg *config.Config, m *config.Model, ep provider.Endpoint) proxy.Options {
	inspect := cfg.Tracking.On() && (ep != provider.Responses || cfg.Tracking.Responses)
	o := proxy.Options{
		MaxAttempts:  cfg.Retries.MaxAttempts,
		MaxRounds:    cfg.Retries.MaxRounds,
		BackoffBase:  cfg.Retries.BackoffBase.D(),
		MaxBackoff:   cfg.Retries.MaxBackoff.D(),
		Deadline:     cfg.Timeouts.Request.D(),
		Inspect:      inspect,
		DefaultPause: time.Duration(cfg.Performance.QuotaPauseDefaultSeconds) * time.Second,
	}
	if inspect {
		o.TTFT = cfg.TTFTFor(m)
	}
	return o
}

// inference serves the OpenAI endpoints.
func (s *Server) inference(ep provider.Endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			methodNotAllowed(w, r, "POST")
			return
		}
		snap := s.entry(w, r)
		if snap == nil {
			return
		}
		body, aerr := readBody(r, w, snap.Config.Limits.MaxRequestBody)
		if aerr != nil {
			writeError(w, OpenAI, aerr)
			return
		}
		model, stream, aerr := inspectBody(body)
		if aerr != nil {
			writeError(w, OpenAI, aerr)
			return
		}
		rt := snap.Routes.Lookup(model)
		if rt == nil {
			writeError(w, OpenAI, modelNotFound(model))
			return
		}
		if ep == provider.Embeddings {
			stream = false
		}
		call := &proxy.Call{Endpoint: ep, Body: body, Stream: stream, Header: forwardHeaders(r), Route: rt,
			Order: route.Measured{Stats: s.Stats}.Order(rt), Opts: options(snap.Config, rt.Model, ep)}
		res, fail := s.proxy.Do(r.Context(), call)
		if fail != nil {
			s.Prober.AfterRequest(rt)
			if fail.Canceled {
				s.Log.InfoContext(r.Context(), "client went away before an answer", "model", model)
				return
			}
			writeFailure(w, OpenAI, fail)
			return
		}
		defer res.Close()
		s.relay(w, r, res, ep, rt, call.Opts.Inspect)
	}
}

// drain discards the rest of a body so the connection can be reused.
func drain(rc io.Reader) { _, _ = io.Copy(io.Discard, io.LimitReader(rc, 1<<20)) }

// hopHeaders are upstream headers that describe the upstream connection or
// the upstream's encoding, not the answer: never relayed.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Connection": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
	"Content-Encoding": true, "Set-Cookie": true, "Date": true, "Server": true, "Alt-Svc": true,
	"Strict-Transport-Security": true, "X-Request-Id": true,
}

// copyUpstreamHeaders relays the provider's headers (its rate-limit and
// Retry-After headers included, untouched); the upstream's request id is
// renamed so it does not clobber ours.
func copyUpstreamHeaders(dst, src http.Header) {
	for k, v := range src {
		if hopHeaders[k] || strings.HasPrefix(k, "Cf-") {
			continue
		}
		dst[k] = v
	}
	if id := src.Get("X-Request-Id"); id != "" {
		dst.Set("X-Upstream-Request-Id", id)
	}
}
