package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"

	"switchboard/internal/admit"
	"switchboard/internal/config"
	"switchboard/internal/jsoncheck"
	"switchboard/internal/limit"
	"switchboard/internal/provider"
	"switchboard/internal/proxy"
	"switchboard/internal/route"
	"switchboard/internal/tenant"
)

// Handler returns the gateway's routes behind its middleware.
func (s *Server) Handler() http.Handler { return s.wrap(s.routes()) }

// jobRoutes are the routes a worker serves jobs through: no access log or
// request metrics (the ingress counted the request).
func (s *Server) jobRoutes() http.Handler {
	s.jobMux.Do(func() { s.jobH = s.routes() })
	return s.jobH
}

func (s *Server) routes() *http.ServeMux {
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
	mux.HandleFunc("/v1/usage", s.get(s.handleUsage))
	mux.HandleFunc("/dashboard", s.get(s.handleDashboard))
	mux.HandleFunc("/dashboard/data", s.get(s.handleDashboardData))
	s.adminRoutes(mux)
	s.usageRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, protocolOf(r), &apiError{Status: http.StatusNotFound, Type: "invalid_request_error",
			Code: "not_found", Message: fmt.Sprintf("no route for %s %s", shown(r.Method), shown(r.URL.Path))})
	})
	return mux
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
		Code: "method_not_allowed", Message: fmt.Sprintf("method %s is not allowed on %s; use %s", shown(r.Method), shown(r.URL.Path), allow)})
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

// handleMetrics serves Prometheus metrics. They name every provider and
// tenant, so whenever any auth is configured they need auth.metrics_token
// or an admin key; without any auth they are open.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	// Keys issued through the admin API turn auth on as config keys do.
	authOn := func(snap *Snapshot) bool { return snap.Config.Auth.Enabled() || s.Admission.Keys().Enabled() }
	if snap := s.snap.Load(); snap != nil && (snap.metricsHash != nil || authOn(snap)) {
		k := presentedKey(r)
		ok := k != "" && snap.metricsHash != nil && checkToken(k, snap.metricsHash)
		// auth.admin_token opens everything an admin key does.
		ok = ok || k != "" && snap.adminHash != nil && checkToken(k, snap.adminHash)
		if !ok && k != "" && authOn(snap) {
			if id, known := s.Admission.Authenticate(k); known {
				if !tenant.Operator(id) {
					writeError(w, OpenAI, &apiError{Status: http.StatusForbidden, Type: "permission_error",
						Code: "admin_required", Message: "metrics need an admin key (role: admin), auth.admin_token or auth.metrics_token"})
					return
				}
				ok = true
			}
		}
		if !ok {
			writeError(w, OpenAI, &apiError{Status: http.StatusUnauthorized, Type: "authentication_error",
				Code: "invalid_api_key", Message: "metrics need auth.metrics_token, auth.admin_token or an admin key (role: admin) as a Bearer token"})
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
// It returns the caller's identity (nil when auth is off); a nil snapshot
// means the answer was written.
func (s *Server) entry(w http.ResponseWriter, r *http.Request) (*Snapshot, *tenant.Identity) {
	snap := s.snap.Load()
	if jc := jobOf(r.Context()); jc != nil && snap != nil {
		return snap, jc.id // a queued job: the ingress authenticated it
	}
	if snap == nil || s.draining.Load() {
		writeError(w, protocolOf(r), &apiError{Status: http.StatusServiceUnavailable, Type: "server_error",
			Code: "unavailable", Message: "the gateway is starting or shutting down", RetryAfter: time.Second})
		return nil, nil
	}
	id, ok := s.Admission.Authenticate(presentedKey(r))
	if !ok {
		writeError(w, protocolOf(r), unauthorized(id, "missing or invalid API key: send it as Authorization: Bearer <key>, x-api-key or x-goog-api-key"))
		return nil, nil
	}
	return snap, id
}

// unauthorized is the 401 for a key Authenticate refused: key_expired
// when it names an expired key (id not nil), else invalid_api_key with msg.
func unauthorized(id *tenant.Identity, msg string) *apiError {
	if id != nil {
		return &apiError{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "key_expired",
			Message: fmt.Sprintf("this API key (%s) expired at %s; ask the operator for a new one", id.KeyID, id.ExpiresAt.UTC().Format(time.RFC3339))}
	}
	return &apiError{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "invalid_api_key", Message: msg}
}

type modelObject struct {
	ID            string          `json:"id"`
	Object        string          `json:"object"`
	Created       int64           `json:"created"`
	OwnedBy       string          `json:"owned_by"`
	ContextLength int             `json:"context_length,omitempty"`
	Providers     []modelProvider `json:"providers,omitempty"`
	// Routing and Fallbacks (admins): the model's policy and the models
	// it falls back to.
	Routing   string   `json:"routing,omitempty"`
	Fallbacks []string `json:"fallbacks,omitempty"`
}

type modelProvider struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Type     string `json:"type"`
	Primary  bool   `json:"primary"`
}

// anthropicModel is a model in Anthropic's Models API shape, for Anthropic
// SDK clients (they send anthropic-version).
type anthropicModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

func wantsAnthropic(r *http.Request) bool { return r.Header.Get("Anthropic-Version") != "" }

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	snap, id := s.entry(w, r)
	if snap == nil {
		return
	}
	if wantsAnthropic(r) {
		data := make([]anthropicModel, 0, len(snap.Config.Models))
		for _, m := range snap.Config.Models {
			if !id.MayUse(m.Name) {
				continue
			}
			data = append(data, anthropicModel{Type: "model", ID: m.Name, DisplayName: m.Name, CreatedAt: snap.loaded.UTC().Format(time.RFC3339)})
		}
		out := map[string]any{"data": data, "has_more": false, "first_id": nil, "last_id": nil}
		if len(data) > 0 {
			out["first_id"], out["last_id"] = data[0].ID, data[len(data)-1].ID
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	data := make([]modelObject, 0, len(snap.Config.Models))
	for _, m := range snap.Config.Models {
		if !id.MayUse(m.Name) {
			continue // a key limited to some models sees only those
		}
		data = append(data, modelObject{ID: m.Name, Object: "model", Created: snap.loaded.Unix(), OwnedBy: "switchboard", ContextLength: m.ContextLength})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	snap, id := s.entry(w, r)
	if snap == nil {
		return
	}
	name := r.PathValue("name")
	rt := snap.Routes.Lookup(name)
	if rt == nil || !id.MayUse(rt.Model.Name) {
		proto := OpenAI
		if wantsAnthropic(r) {
			proto = Anthropic
		}
		writeError(w, proto, modelNotFound(name))
		return
	}
	if wantsAnthropic(r) {
		writeJSON(w, http.StatusOK, anthropicModel{Type: "model", ID: name, DisplayName: name, CreatedAt: snap.loaded.UTC().Format(time.RFC3339)})
		return
	}
	mo := modelObject{ID: name, Object: "model", Created: snap.loaded.Unix(), OwnedBy: "switchboard", ContextLength: rt.Model.ContextLength}
	if !tenant.Operator(id) {
		writeJSON(w, http.StatusOK, mo) // providers are the operator's business
		return
	}
	for i, c := range rt.Candidates {
		mo.Providers = append(mo.Providers, modelProvider{Provider: c.Provider, Model: c.Model, Type: c.Type, Primary: i == rt.Primary})
	}
	mo.Routing, mo.Fallbacks = rt.Policy, modelsOf(rt.Model.Fallbacks)
	writeJSON(w, http.StatusOK, mo)
}

// modelNotFound is also the answer for a model the key may not use
// (OpenAI's convention: "does not exist or you do not have access"), so
// that a limited key learns nothing about the models it cannot call.
func modelNotFound(name string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found", Param: "model",
		Message: fmt.Sprintf("The model %q does not exist or this key may not use it; GET /v1/models lists the models it may use", shown(name))}
}

// readBody reads the whole request body within the configured limit. The
// body is read before anything is sent upstream: Go's HTTP/1 server closes
// an unread request body once response headers go out, which can tear down
// a fast upstream stream mid-way (golang/go#40747).
//
// The whole body must arrive within timeout of the handler's start
// (limits.body_timeout), or the answer is 408: a body trickled byte by byte
// must not hold a connection and a slot for ever.
func readBody(r *http.Request, w http.ResponseWriter, limit int64, timeout time.Duration) ([]byte, *apiError) {
	if limit <= 0 {
		limit = 10 << 20
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	if timeout > 0 && r.ContentLength != 0 {
		// Unsupported only where the connection is not ours (tests).
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
	}
	b, err := provider.ReadAllSized(http.MaxBytesReader(w, r.Body, limit), r.ContentLength)
	if err != nil {
		var mb *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &mb):
			return nil, tooLarge(limit)
		case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
			return nil, &apiError{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "body_timeout",
				Message: fmt.Sprintf("the request body did not arrive within limits.body_timeout (%s)", timeout)}
		}
		return nil, errInvalid("could not read the whole request body")
	}
	return b, nil
}

func tooLarge(limit int64) *apiError {
	return &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
		Message: fmt.Sprintf("request body is larger than limits.max_request_body (%d bytes)", limit)}
}

// inspectBody validates the JSON envelope and reads model and stream
// (on a refusal: what it read, for the usage row). A
// duplicate top-level key is refused: parsers disagree on which copy wins,
// so routing, billing and the upstream could each see another model.
func inspectBody(body []byte) (model string, stream bool, e *apiError) {
	if !jsoncheck.DepthOK(body, jsoncheck.MaxDepth) {
		return "", false, errInvalid(fmt.Sprintf("request body nests arrays or objects deeper than %d levels", jsoncheck.MaxDepth))
	}
	if !gjson.ValidBytes(body) { // depth checked just above
		var v json.RawMessage
		msg := "not valid JSON"
		if _, m, ok := jsoncheck.DecodeError(json.Unmarshal(body, &v)); ok {
			msg = m
		}
		return "", false, errInvalid("request body is " + msg)
	}
	// The body is never modified after this point, so the parse may alias
	// it instead of copying it into a string (a 50 KB body, 50 KB saved).
	root := gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body)))
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
				model = strings.Clone(v.Str) // outlives the request in logs and metrics
			}
		case "stream":
			stream = v.Type == gjson.True
		case "n":
			e = checkN(v)
			return e == nil
		}
		return true
	})
	if e != nil {
		if e.Param == "model" {
			model = "" // twice: which one the client meant is the question
		}
		return model, stream, e // for the refusal's usage row
	}
	if model == "" {
		e = errInvalid("missing required field \"model\" (a non-empty string)")
		e.Param = "model"
		return "", false, e
	}
	return model, stream, nil
}

// MaxN bounds a request's candidate count n, as OpenAI's API does: each
// candidate is a whole answer, so an absurd n is a mistake, and one
// billed n times would otherwise be refused for its price with advice
// about the prompt or max_tokens.
const MaxN = 128

// checkN refuses an n that is not an integer from 1 to MaxN (null is
// absent), before the request is priced or sent.
func checkN(v gjson.Result) *apiError {
	if v.Type == gjson.Null {
		return nil
	}
	if n, ok := limit.UnsignedInt(v); ok && n >= 1 && n <= MaxN {
		return nil
	}
	got := v.Raw
	if len(got) > 40 {
		got = got[:40] + "..." // the value is the client's; the message stays short
	}
	e := errInvalid(fmt.Sprintf("n must be an integer from 1 to %d, got %s", MaxN, got))
	e.Param = "n"
	return e
}

// forwarded are the client headers passed upstream; everything else
// (notably the client's own Authorization and x-api-key) stays here.
// The names are canonical, so that an operator's header of the same name
// (canonicalised at load) replaces the client's instead of joining it.
var forwarded = []string{http.CanonicalHeaderKey("OpenAI-Organization"), http.CanonicalHeaderKey("OpenAI-Beta"),
	http.CanonicalHeaderKey("OpenAI-Project"), http.CanonicalHeaderKey("Anthropic-Beta")}

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
		Retry429:     cfg.Retries.On429 == config.On429Retry,
	}
	if inspect {
		o.TTFT = cfg.TTFTFor(m)
	}
	o.FirstByte = cfg.FirstByteFor(m)
	if h, on := cfg.HedgeFor(m); on {
		o.Hedge = &proxy.Hedge{After: h.After.Fixed.D(), Percentile: float64(h.After.Percentile) / 100, MaxExtra: *h.MaxExtra}
	}
	return o
}

// incoming is one parsed client request holding a preparation slot.
type incoming struct {
	snap    *Snapshot
	id      *tenant.Identity
	body    []byte
	model   string
	stream  bool
	rt      *route.Route
	release func()
}

// prepare authenticates, reads and checks the body, takes the logical
// preparation slot and resolves the model. It writes every refusal itself
// (nil = answered); the caller releases the slot when the answer ends.
func (s *Server) prepare(w http.ResponseWriter, r *http.Request, proto Protocol) *incoming {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, r, "POST")
		return nil
	}
	snap, id := s.entry(w, r)
	if snap == nil {
		return nil
	}
	body, aerr := readBody(r, w, snap.Config.Limits.MaxRequestBody, snap.Config.Limits.BodyTimeout.D())
	if aerr != nil {
		writeError(w, proto, aerr)
		s.refusedUsage(r, id, "", false, aerr.Status)
		return nil
	}
	model, stream, aerr := inspectBody(body)
	if aerr != nil {
		writeError(w, proto, aerr)
		s.refusedUsage(r, id, model, stream, aerr.Status)
		return nil
	}
	release, ref := s.Admission.Enter(r.Context(), id)
	if ref != nil {
		status := statusClientClosed
		if ref.Code != "canceled" {
			s.writeRefusal(w, proto, id, ref)
			status = ref.Status
		}
		s.refusedUsage(r, id, model, stream, status)
		return nil
	}
	rt := snap.Routes.Lookup(model)
	if rt == nil || !id.MayUse(rt.Model.Name) {
		release()
		writeError(w, proto, modelNotFound(model))
		s.refusedUsage(r, id, model, stream, http.StatusNotFound)
		return nil
	}
	return &incoming{snap: snap, id: id, body: body, model: model, stream: stream, rt: rt, release: release}
}

// call builds the attempt loop's input for in.
func (s *Server) call(r *http.Request, in *incoming, ep provider.Endpoint, body []byte) *proxy.Call {
	c := &proxy.Call{Endpoint: ep, Body: body, Stream: in.stream, Header: forwardHeaders(r), Route: in.rt,
		Order: s.selector.OrderBody(in.rt, body), Opts: options(in.snap.Config, in.rt.Model, ep),
		Identity: in.id, ClientModel: in.model, Meter: needsUsage(in.snap, in.id) || in.snap.Config.Tracking.On()}
	if jc := jobOf(r.Context()); jc != nil {
		// The total deadline covers the queue wait too; it never grows.
		c.Opts.Deadline = min(c.Opts.Deadline, jc.left)
	}
	return c
}

// needsUsage: budgets and token buckets settle on the provider's reported
// usage, so streams must carry it. With tracking on, streams ask for it
// anyway (and hide it from a client that did not): the stream's log line
// and routing samples carry real prompt and completion counts.
func needsUsage(snap *Snapshot, id *tenant.Identity) bool {
	return snap.anyTPM || id != nil && (id.BudgetNano != nil || id.TPM != nil)
}

// failed answers a loop that found no answer.
func (s *Server) failed(w http.ResponseWriter, r *http.Request, proto Protocol, in *incoming, fail *proxy.Failure) {
	s.Prober.AfterRequest(in.rt)
	switch {
	case fail.Canceled:
		s.Log.InfoContext(r.Context(), "client went away before an answer", "model", in.model)
	case fail.Refusal != nil:
		s.writeRefusal(w, proto, in.id, skippedRefusal(fail, in))
	default:
		writeFailure(w, proto, fail, in.snap.secrets)
	}
}

// skippedRefusal is the answer when the gateway itself passed over the
// providers (provider-scoped refusals) and none was left. An admin is told
// each provider and why; a tenant the same verdict without provider names.
// A request-scoped refusal (the caller's own limit) is returned as is.
func skippedRefusal(fail *proxy.Failure, in *incoming) *admit.Refusal {
	last := fail.Refusal
	if last.Scope != admit.ScopeProvider || len(fail.Skipped) == 0 {
		return last
	}
	out := *last
	if tenant.Operator(in.id) {
		var b strings.Builder
		fmt.Fprintf(&b, "no provider of model %q could take this request:", in.model)
		for i, sk := range fail.Skipped {
			if i > 0 {
				b.WriteString(";")
			}
			fmt.Fprintf(&b, " %s (model %s): %s", sk.Provider, sk.Model, sk.Refusal.Message)
		}
		out.Message = b.String()
		return &out
	}
	n := len(fail.Skipped)
	switch last.Code {
	case admit.CodeUnpriceable:
		out.Message = fmt.Sprintf("the cost of this request cannot be bounded under your budget on any of the %d provider entries of model %q "+
			"(unknown price or output limit); set max_tokens, use another model, or ask the operator for budget_allow_unpriced", n, in.model)
	case admit.CodeRequestTooCostly:
		// Its message names amounts and max_tokens, no provider.
	case admit.CodeOverloaded:
		out.Message = fmt.Sprintf("every provider of model %q is at its concurrency limit; retry later", in.model)
	default:
		out.Message = fmt.Sprintf("every provider of model %q is at its rate limit; retry in %d s", in.model, last.RetryAfter)
	}
	return &out
}

// inference serves the OpenAI endpoints.
func (s *Server) inference(ep provider.Endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		in := s.prepare(w, r, OpenAI)
		if in == nil {
			return
		}
		defer in.release()
		if ep == provider.Embeddings {
			in.stream = false
		}
		w, r, u := s.beginUsage(w, r, in, ep)
		defer s.endUsage(r, u)
		s.idempotent(w, r, OpenAI, in, s.cached(r, OpenAI, cacheProtocol(ep), in, func(w http.ResponseWriter) {
			if s.queued(r) {
				s.dispatch(w, r, OpenAI, ep, in)
				return
			}
			call := s.call(r, in, ep, in.body)
			res, fail := s.do(r.Context(), in, call)
			if fail != nil {
				s.failed(w, r, OpenAI, in, fail)
				return
			}
			defer res.Close()
			s.advise(w, in, res)
			s.relay(w, r, res, ep, in.rt, call.Opts.Inspect || call.Meter)
		}))
	}
}

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
