package inference

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"switchboard/internal/front"
	"switchboard/internal/peek"
	"switchboard/internal/provider"
	"switchboard/internal/proxy"
	"switchboard/internal/snapshot"
	"switchboard/internal/tenant"
	"switchboard/internal/translate"
)

// Gemini's model methods.
const (
	geminiGenerate = "generateContent"
	geminiStream   = "streamGenerateContent"
	geminiCount    = "countTokens"
)

// GeminiModel serves Gemini API clients on /v1beta/models/{name} (and
// /v1/models/{name} with a method): POST {model}:generateContent,
// :streamGenerateContent (SSE with ?alt=sse, else one JSON array) and
// :countTokens; GET without a method is the model. The request goes
// untranslated to gemini providers and translated to the others; every
// error is in Google's shape.
func (s *Plane) GeminiModel(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity) {
	name := strings.TrimPrefix(r.PathValue("name"), "models/")
	model, method := name, ""
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		model, method = name[:i], name[i+1:]
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		if method != "" {
			front.MethodNotAllowed(w, r, "POST")
			return
		}
		s.geminiModelInfo(w, snap, id, model)
		return
	}
	if r.Method != http.MethodPost {
		front.MethodNotAllowed(w, r, "GET, POST")
		return
	}
	switch method {
	case geminiGenerate, geminiStream, geminiCount:
	default:
		front.WriteError(w, front.Gemini, &front.Error{Status: http.StatusNotFound,
			Message: "unknown method " + front.Shown(":"+method) + "; the gateway serves :generateContent, :streamGenerateContent and :countTokens"})
		return
	}
	if model == "" {
		front.WriteError(w, front.Gemini, front.Invalid("the URL names no model: /v1beta/models/{model}:"+method))
		return
	}
	stream := method == geminiStream
	in := s.prepareFor(w, r, snap, id, front.Gemini, provider.GenerateContent, model, stream)
	if in == nil {
		return
	}
	defer in.release()
	ep := provider.GenerateContent
	if method == geminiCount {
		ep = provider.CountTokens
	}
	w, r, u := s.beginUsage(w, r, in, ep)
	defer s.endUsage(r, u)
	if method == geminiCount {
		s.countTokens(w, r, in, front.Gemini, provider.CountTokens, func(n int64) []byte { return translate.GeminiTokenCount(n) })
		return
	}
	b := &bridge{proto: front.Gemini, native: provider.GenerateContent, topK: "generationConfig.topK"}
	if allNative(provider.GenerateContent, in.rt) {
		// Every provider takes the body as it is: nothing to translate.
	} else if gi, err := translate.FromGemini(in.body, model, stream); err != nil {
		b.refusal = err
	} else {
		b.chat, b.dropped = gi.Body, gi.Dropped
		b.answer = func(chat []byte, model string) ([]byte, error) {
			out, _, err := gi.Answer(chat, model)
			return out, err
		}
		b.stream = func(model string) translate.ClientStream { return gi.Stream(model) }
	}
	if stream && r.URL.Query().Get("alt") != "sse" {
		b.sink = newArraySink
	}
	// Gemini requests run here in queue mode too: a queued job keeps its
	// path but not ?alt=sse, which decides the stream's framing.
	s.idempotent(w, r, front.Gemini, in, s.cached(r, front.Gemini, cacheProtocol(provider.GenerateContent), in,
		func(w http.ResponseWriter) { s.serveBridged(w, r, in, b) }))
}

// arraySink frames a stream as streamGenerateContent's JSON array (no
// ?alt=sse), flushing each element.
type arraySink struct {
	w io.Writer
	f http.Flusher
	a translate.GeminiArray
}

func newArraySink(w http.ResponseWriter) eventSink {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &arraySink{w: w, f: f}
}

func (s *arraySink) Event(_ string, data []byte) error {
	_, err := s.w.Write(s.a.Item(data))
	s.Flush()
	return err
}

func (s *arraySink) Flush() {
	if s.f != nil {
		s.f.Flush()
	}
}

func (s *arraySink) Close() {
	_, _ = s.w.Write(s.a.Close())
	s.Flush()
}

// geminiModel is a model in the Gemini API's shape.
type geminiModel struct {
	Name                       string   `json:"name"`
	BaseModelID                string   `json:"baseModelId"`
	Version                    string   `json:"version"`
	DisplayName                string   `json:"displayName"`
	InputTokenLimit            int64    `json:"inputTokenLimit,omitempty"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
}

var geminiMethods = []string{geminiGenerate, geminiStream, geminiCount}

func geminiModelOf(name string, ctx int64) geminiModel {
	return geminiModel{Name: "models/" + name, BaseModelID: name, Version: "switchboard", DisplayName: name,
		InputTokenLimit: ctx, SupportedGenerationMethods: geminiMethods}
}

// GeminiModels serves GET /v1beta/models: the models the caller may use,
// in the Gemini API's shape (one page).
func (s *Plane) GeminiModels(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity) {
	data := make([]geminiModel, 0, len(snap.Config.Models))
	for _, m := range snap.Config.Models {
		if id.MayUse(m.Name) {
			data = append(data, geminiModelOf(m.Name, int64(m.ContextLength)))
		}
	}
	front.WriteJSON(w, http.StatusOK, map[string]any{"models": data})
}

func (s *Plane) geminiModelInfo(w http.ResponseWriter, snap *snapshot.Snapshot, id *tenant.Identity, name string) {
	rt := snap.Routes.Lookup(name)
	if rt == nil || !id.MayUse(rt.Model.Name) {
		front.WriteError(w, front.Gemini, modelNotFound(name))
		return
	}
	front.WriteJSON(w, http.StatusOK, geminiModelOf(name, int64(rt.Model.ContextLength)))
}

// countTokens answers a token count: the upstream's own, passed through
// untranslated, when a provider of the model speaks the client's protocol
// (ep), else the gateway's estimate of the prompt. A count is free at the
// vendors, so it is neither admitted nor charged; a failed upstream count
// falls back to the estimate.
func (s *Plane) countTokens(w http.ResponseWriter, r *http.Request, in *incoming, proto front.Protocol, ep provider.Endpoint,
	answer func(n int64) []byte) {
	native := provider.Messages
	if ep == provider.CountTokens {
		native = provider.GenerateContent
	}
	for _, cand := range proxy.DefaultOrder(in.rt) {
		if !proxy.TakesNative(native, cand) || !provider.Serves(cand.Send, ep) {
			continue
		}
		body, status, err := s.Proxy.Count(r.Context(), cand, ep, in.body, forwardHeaders(r), in.snap.Config.Timeouts.Request.D())
		if err == nil {
			s.setCountHeaders(w, cand.Provider, in)
			front.WriteUnary(w, status, s.secrets().Bytes(body))
			return
		}
		var perr *provider.Error
		if errors.As(err, &perr) && perr.Status == http.StatusBadRequest && len(perr.Body) > 0 {
			// The client's request is wrong: the vendor's own words.
			body := perr.Body
			if proto == front.Gemini {
				body = translate.ErrorToGemini(perr.Status, body)
			} else {
				body = translate.ErrorToAnthropic(perr.Status, body)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(perr.Status)
			_, _ = w.Write(s.secrets().Bytes(body))
			return
		}
		s.Log.WarnContext(r.Context(), "upstream token count failed; answering the estimate", "provider", cand.Provider, "error", err.Error())
		break
	}
	w.Header().Set("X-Switchboard-Count", "estimate")
	front.WriteUnary(w, http.StatusOK, answer(peek.PromptTokens(in.body)))
}

func (s *Plane) setCountHeaders(w http.ResponseWriter, prov string, in *incoming) {
	h := w.Header()
	h.Set("X-Switchboard-Provider", prov)
	h.Set("X-Switchboard-Model", in.rt.Model.Name)
	h.Set("X-Switchboard-Count", "provider")
}
