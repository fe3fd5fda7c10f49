package inference

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/provider"
	"switchboard/internal/proxy"
	"switchboard/internal/route"
)

// FallbackModelHeader names the model that served when it is not the one
// the client asked for (a cross-model fallback); absent otherwise.
// X-Switchboard-Model keeps the client's name, as on every answer.
const FallbackModelHeader = "X-Switchboard-Fallback-Model"

// serve runs the attempt loop for call's model and, when every provider
// failed with a condition the model's fallbacks cover, for its fallback
// models in order: each with its own providers, routing policy, timeouts
// and admission (so its own price is reserved), all within the request's
// one deadline. A result names the route that served (Result.Route).
// Nothing has reached the client when a fallback starts: a stream only
// commits once a token arrived.
func (s *Plane) serve(ctx context.Context, in *incoming, call *proxy.Call) (*proxy.Result, *proxy.Failure) {
	deadline := s.Clock.Now().Add(call.Opts.Deadline)
	var est *route.Estimate
	size := func() route.Estimate {
		if est == nil {
			e := route.EstimateOf(call.Body)
			est = &e
		}
		return *est
	}
	visited := map[string]bool{}
	// usable: a fallback not yet tried this request, that the caller's key
	// may use (a key limited to some models falls back only among them)
	// and that has a provider for the endpoint (an Anthropic-only model
	// cannot take a /v1/responses request).
	usable := func(name string) bool {
		rt := in.snap.Routes.Lookup(name)
		return !visited[name] && rt != nil && in.id.MayUse(name) && rt.Serves(call.Endpoint)
	}
	var attempts []proxy.Attempt
	var walk func(c *proxy.Call) (*proxy.Result, *proxy.Failure)
	walk = func(c *proxy.Call) (*proxy.Result, *proxy.Failure) {
		rt := c.Route
		visited[rt.Model.Name] = true
		fb := rt.Model.Fallbacks
		var fail *proxy.Failure
		var cond string
		if e, over := s.overContext(rt, fb, usable, size); over {
			// The prompt cannot fit: no provider of this model is sent
			// it (nor billed for it).
			cond, fail = config.FallbackContextWindow, &proxy.Failure{}
			s.Log.LogAttrs(ctx, slog.LevelInfo, "model skipped: request exceeds its context window",
				slog.String("model", rt.Model.Name), slog.Int64("estimate", e), slog.Int64("context_length", rt.ContextLength))
		} else {
			if fb.Covers(config.FallbackRateLimit) && slices.ContainsFunc(fb.Models, usable) {
				c.Opts.LeaveWhenPaused = true
			}
			res, f := s.Proxy.Do(ctx, c)
			if res != nil {
				res.Route = rt
				return res, nil
			}
			fail, cond = f, f.Condition()
		}
		fail.Attempts = append(attempts, fail.Attempts...)
		attempts = fail.Attempts
		if !fb.Covers(cond) {
			return nil, fail
		}
		// The model's failure met its on: every fallback is tried in
		// turn, whatever the previous one failed with, unless that
		// failure ends the request (client gone, the caller's own limit,
		// a request refused as invalid).
		handed := false
		for _, name := range modelsOf(fb) {
			if !usable(name) {
				continue
			}
			next := in.snap.Routes.Lookup(name)
			left := deadline.Sub(s.Clock.Now())
			if left <= 0 {
				fail.DeadlineHit = true
				break
			}
			if !handed {
				// Once a request, however many fallbacks it tries (the
				// metric counts each hop).
				s.Stats.CountFallback(rt.Model.Name)
				handed = true
			}
			s.Log.LogAttrs(ctx, slog.LevelWarn, "model fallback", slog.String("model", rt.Model.Name),
				slog.String("fallback", name), slog.String("condition", cond))
			s.Metrics.ModelFallbacks.WithLabelValues(rt.Model.Name, name, cond).Inc()
			traceFallback(ctx, rt.Model.Name, name, cond)
			res, f := walk(s.fallbackCall(c, in, next, left))
			if res != nil {
				return res, nil
			}
			if f.RefusedAfterOutage(fail) {
				break // the providers' failure is the answer
			}
			fail = f
			if f.Condition() == "" {
				break
			}
		}
		return nil, fail
	}
	return walk(call)
}

// overContext reports whether the request's estimate (prompt plus its
// stated output limit) exceeds rt's context window while a fallback that
// covers context_window is left to take it. Without one the request is
// sent anyway: the estimate is a heuristic, and the provider's own answer
// is the authority.
func (s *Plane) overContext(rt *route.Route, fb *config.Fallbacks, usable func(string) bool, size func() route.Estimate) (int64, bool) {
	if rt.ContextLength <= 0 || !fb.Covers(config.FallbackContextWindow) || !slices.ContainsFunc(fb.Models, usable) {
		return 0, false
	}
	e := size()
	n := e.Input + min(e.StatedOutput, math.MaxInt64-e.Input) // a max_tokens near 2^63 must not wrap
	return n, n > rt.ContextLength
}

// fallbackCall is c moved to the fallback model next, with left of the
// request's deadline.
func (s *Plane) fallbackCall(c *proxy.Call, in *incoming, next *route.Route, left time.Duration) *proxy.Call {
	nc := *c
	nc.Route = next
	nc.Order = s.Selector.OrderBody(next, c.Body)
	nc.Opts = options(in.snap.Config, next.Model, c.Endpoint)
	nc.Opts.Deadline = min(nc.Opts.Deadline, left)
	return &nc
}

func modelsOf(f *config.Fallbacks) []string {
	if f == nil {
		return nil
	}
	return f.Models
}

// setFallbackHeader names the model that served when it is a fallback.
func setFallbackHeader(h http.Header, res *proxy.Result, rt *route.Route) {
	if res.Route != nil && rt != nil && res.Route != rt {
		h[FallbackModelHeader] = []string{res.Route.Model.Name}
	}
}

// servedRoute is the route whose provider answered: a fallback model's,
// or rt. Samples, logs and probes belong to it.
func servedRoute(res *proxy.Result, rt *route.Route) *route.Route {
	if res.Route != nil {
		return res.Route
	}
	return rt
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
