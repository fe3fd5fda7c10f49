// Package proxy is the attempt loop every endpoint shares, unary and
// streaming: select the next provider, send, classify the outcome, then
// retry the same provider, fall through to the next, start another round,
// or stop. It never writes to the client: it hands back a Result whose
// stream has not been committed to anyone yet, so that a failure before the
// first token can still fall back invisibly.
package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"switchboard/internal/admit"
	"switchboard/internal/clock"
	"switchboard/internal/health"
	"switchboard/internal/jsoncheck"
	"switchboard/internal/metrics"
	"switchboard/internal/provider"
	"switchboard/internal/route"
	"switchboard/internal/spend"
	"switchboard/internal/sse"
	"switchboard/internal/tenant"
	"switchboard/internal/tracing"
	"switchboard/internal/track"
)

// Options are one request's loop parameters, taken from the config snapshot.
type Options struct {
	MaxAttempts int
	MaxRounds   int
	BackoffBase time.Duration
	MaxBackoff  time.Duration
	// Deadline bounds the whole loop: every round, wait and attempt until a
	// stream commits or a unary answer is read.
	Deadline time.Duration
	// TTFT is the first-token timeout for streams; 0 = off.
	TTFT time.Duration
	// FirstByte bounds a unary attempt until the upstream's first
	// response byte (for an in-process provider: until its answer); 0 =
	// off. Like TTFT, expiry falls back to the next provider at once.
	FirstByte time.Duration
	// Inspect enables the stream gate (tracking on). Off, a stream commits
	// at its first byte.
	Inspect bool
	// DefaultPause applies to quota answers without a stated reset.
	DefaultPause time.Duration
	// Retry429 (retries.on_429: retry) retries an upstream 429 on the same
	// provider after its stated wait (else the backoff), as llmshim does,
	// instead of pausing the provider and falling through. 402 and
	// quota-flavoured 403 answers still pause.
	Retry429 bool
	// Hedge starts extra attempts next to a slow one; nil = off.
	Hedge *Hedge
	// LeaveWhenPaused ends the loop instead of starting another round
	// when every provider is quota-paused: the caller has a fallback
	// model for rate limits, better than waiting for a reset.
	LeaveWhenPaused bool
}

// Call is one client request.
type Call struct {
	Endpoint provider.Endpoint
	// Body is the OpenAI-shaped request as the client sent it (or as
	// translated from another protocol).
	Body []byte
	// Native, when set, is the client's body in its own protocol
	// (NativeEndpoint's), sent untranslated to the providers that speak
	// it (TakesNative); the others get Body. Body is nil when the client's
	// request could not be translated: only native providers may serve.
	Native []byte
	// NativeEndpoint is Native's protocol: Messages (the default),
	// GenerateContent or Responses.
	NativeEndpoint provider.Endpoint
	Stream         bool
	// Header holds client headers to forward (already filtered).
	Header http.Header
	Route  *route.Route
	// Order is the attempt order; nil means the route's primary first, then
	// config order.
	Order []*route.Candidate
	Opts  Options
	// Identity is the caller (nil when auth is off); ClientModel the model
	// it asked for.
	Identity    *tenant.Identity
	ClientModel string
	// Meter asks OpenAI-compatible chat streams for their usage
	// (stream_options.include_usage) so that budgets and token buckets
	// settle on real counts; the usage chunk is stripped again when the
	// client did not ask for it.
	Meter bool

	// side is the hedged race's attempt this copy of the call runs; nil
	// outside a race.
	side *side
}

// Attempt is one send and how it ended.
type Attempt struct {
	Provider string `json:"provider"`
	// Model is the gateway model the attempt served: with cross-model
	// fallbacks one provider may be tried for several models.
	Model  string `json:"model"`
	Status int    `json:"status"`
	Reason string `json:"reason"`
}

// attemptOf is an attempt of c on cand.
func (c *Call) attemptOf(cand *route.Candidate, status int, reason string) Attempt {
	a := Attempt{Provider: cand.Provider, Status: status, Reason: reason}
	if c.Route != nil && c.Route.Model != nil {
		a.Model = c.Route.Model.Name
	}
	return a
}

// Result is a successful answer not yet written to the client.
type Result struct {
	Candidate *route.Candidate
	// Route is the model route that served, set by the caller when it may
	// differ from the client's (a cross-model fallback); nil otherwise.
	Route *route.Route
	// Native is true when the answer is in the client's own protocol
	// (the call's NativeEndpoint), relayed untranslated.
	Native bool
	Status int
	Header http.Header
	// Body is the whole unary answer.
	Body []byte
	// Held are the stream events read before the commit, to be written
	// first; Events yields the rest.
	Held   []sse.Event
	Events *sse.Reader
	// FirstToken is when the commit event arrived (streams).
	FirstToken time.Time
	// Permit is the stream's admission, settled by whoever relays it
	// (unary answers are settled by the loop); nil without admission.
	Permit *admit.Permit
	// Usage is a unary answer's reported usage.
	Usage track.Usage
	// Bill is a stream's provider-reported cost (usage.cost), nano-USD,
	// noted by the relay for settlement; nil when none was reported.
	Bill *int64
	// StripUsage: the gateway added include_usage; drop the usage-only
	// chunk before the client sees it.
	StripUsage bool
	// Trace is a stream's attempt span, ended by its relay (nil: not
	// traced).
	Trace *tracing.Attempt
	// Sent is when the winning attempt was sent.
	Sent   time.Time
	body   io.Closer
	cancel context.CancelFunc
	// hold is the unary Body's share of the buffer budget.
	hold *provider.Hold
	// busy ends the attempt's in-flight count (nil: not counted).
	busy func()
	// proto is the stream's protocol; bound holds it to its reservation's
	// output (nil: none), and produced is what it had produced when cut.
	proto    track.Protocol
	bound    *bound
	produced int64
}

// Close releases the upstream stream, or the unary answer's share of the
// buffer budget.
func (r *Result) Close() {
	r.Trace.End()
	r.hold.Release()
	if r.busy != nil {
		r.busy()
	}
	if r.body != nil {
		r.body.Close()
	}
	if r.cancel != nil {
		r.cancel()
	}
}

// Failure is the end of a loop that found no answer.
type Failure struct {
	Attempts    []Attempt
	DeadlineHit bool
	// Canceled: the client went away; nothing should be written.
	Canceled bool
	// Last is the final attempt's error.
	Last *provider.Error
	// Refusal is the gateway's own refusal that ended the request
	// (caller's rate limit or budget); it is the answer.
	Refusal *admit.Refusal
	// Skipped lists the providers the gateway itself passed over (a
	// provider-scoped refusal: unpriceable under the budget, the request's
	// reservation, the provider's own buckets or slots), in order.
	Skipped []Skip
	// seen tallies the attempts' failures for Condition.
	seen conditions
}

// Skip is one provider the gateway refused to send to.
type Skip struct {
	Provider, Model string
	Refusal         *admit.Refusal
}

// Proxy runs attempt loops.
type Proxy struct {
	Clock clock.Clock
	Log   *slog.Logger
	// Health is consulted before and informed after each attempt; nil
	// treats every provider as available.
	Health *health.Registry
	// Admission gates each attempt right before its send (concurrency
	// slot, rate buckets, spend reservation) and settles it after; nil
	// admits everything.
	Admission *admit.Controller
	// Metrics counts attempts by outcome; nil records nothing.
	Metrics *metrics.Metrics
	// Jitter returns a number in [0,1); nil uses math/rand.
	Jitter func() float64
	// Buffers bounds the unary answers held in memory, gateway-wide; nil
	// bounds each answer only (provider.MaxUnaryBody).
	Buffers *provider.Budget
	// Busy counts each provider's attempts in flight, from the send until
	// the answer is relayed (least_busy routing); nil counts nothing.
	Busy *route.Busy
	// Stats are the measured TTFTs a percentile hedge delay is read from;
	// nil: such hedges never start (fixed delays still do).
	Stats *route.Stats
	// Tracer makes a span per attempt and events of the loop's decisions
	// (trace.go); nil traces nothing.
	Tracer *tracing.Tracer

	hedges sync.WaitGroup // races settling their losers
}

// staleRetries are free retries for a pooled connection that died before
// answering; they do not count as attempts.
const staleRetries = 2

// maxHeld bounds what a stream may send before its first token.
const maxHeld = 1 << 20

// Do runs the loop for one call.
func (p *Proxy) Do(ctx context.Context, c *Call) (*Result, *Failure) {
	deadline := p.Clock.Now().Add(c.Opts.Deadline)
	order := c.Order
	if order == nil {
		order = DefaultOrder(c.Route)
	}
	order = serving(order, c.Endpoint)
	f := &Failure{}
	for round := 0; round < max(1, c.Opts.MaxRounds); round++ {
		if c.Opts.LeaveWhenPaused && p.allPaused(order) {
			// Another model takes rate-limited requests: no waiting for
			// a reset, and no send to providers that asked for a pause
			// (tried anyway only when nothing else could serve).
			if round == 0 {
				f.notePaused(c, order)
			}
			return nil, f
		}
		if round > 0 {
			if !p.wait(ctx, p.roundWait(round, order, c.Opts), deadline, f) {
				return nil, f
			}
		}
		cands, forced := p.available(order)
		p.traceUnavailable(ctx, order, cands, forced)
		allClientErrors := true
		var hedged []*route.Candidate // sent to by a hedge this round
		for i, cand := range cands {
			if slices.Contains(hedged, cand) || p.Health != nil && !p.Health.Begin(cand.Provider, forced) {
				continue
			}
			var res *Result
			var stop, clientErr bool
			if c.Opts.Hedge != nil && !forced && i+1 < len(cands) {
				var used []*route.Candidate
				res, stop, clientErr, used = p.race(ctx, c, cand, cands[i+1:], deadline, f)
				hedged = append(hedged, used...)
			} else {
				res, stop, clientErr = p.tryProvider(ctx, c, cand, deadline, f)
			}
			if res != nil {
				return res, nil
			}
			if stop {
				return nil, f
			}
			allClientErrors = allClientErrors && clientErr
		}
		// A request every provider refused as invalid will not improve by
		// waiting for another round.
		if allClientErrors && len(f.Attempts) > 0 {
			return nil, f
		}
	}
	return nil, f
}

// tryProvider makes up to MaxAttempts attempts on one provider. stop ends
// the whole loop (client gone, deadline); clientErr reports a final
// non-retryable 4xx.
func (p *Proxy) tryProvider(ctx context.Context, c *Call, cand *route.Candidate, deadline time.Time, f *Failure) (res *Result, stop, clientErr bool) {
	stale := 0
	for attempt := 0; attempt < max(1, c.Opts.MaxAttempts); attempt++ {
		res, perr := p.attempt(ctx, c, cand, deadline, attempt)
		if perr == nil {
			p.observe(cand, health.Success)
			if p.Metrics != nil {
				p.Metrics.ProviderSuccess.WithLabelValues(cand.Provider, cand.Model).Inc()
			}
			return res, false, false
		}
		prev := f.Last
		f.Last = perr
		if perr.Kind == provider.KindRefused {
			var ref *admit.Refusal
			errors.As(perr.Err, &ref)
			if ref == nil || ref.Code == "canceled" {
				f.Canceled = true
				return nil, true, false
			}
			if ref.Scope == admit.ScopeRequest && prev != nil && prev.Kind != provider.KindRefused {
				// The providers failed, and the gateway then declined to
				// try again (the caller's own limit, its budget, the
				// gateway's): the answer is the providers' failure, not a
				// refusal of something the client did not ask for.
				f.Last = prev
				p.logRefusedRetry(ctx, c, cand, ref)
				return nil, true, false
			}
			f.Attempts = append(f.Attempts, c.attemptOf(cand, ref.Status, ref.Code))
			f.noteFit(ref)
			if ref.Scope == admit.ScopeProvider {
				f.Skipped = append(f.Skipped, Skip{cand.Provider, cand.Model, ref})
				f.noteRefusal(ref)
				if p.Log != nil {
					p.Log.LogAttrs(ctx, slog.LevelDebug, "provider skipped", slog.String("provider", cand.Provider),
						slog.String("model", cand.Model), slog.String("reason", ref.Code), slog.String("tenant", c.Identity.Label()),
						slog.String("why", ref.Message))
				}
				// A distinct provider may still have room; another round
				// would only meet the same bucket, so it counts as final.
				return nil, false, true
			}
			return nil, true, false
		}
		f.Refusal = nil // the answer is the last outcome, not an earlier refusal
		if perr.Kind == provider.KindCanceled && ctx.Err() != nil {
			f.Canceled = true
			f.Attempts = append(f.Attempts, c.attemptOf(cand, 0, "client_disconnect"))
			p.observe(cand, health.Neutral)
			return nil, true, false
		}
		if perr.Kind == provider.KindStaleConn && stale < staleRetries {
			stale++
			attempt--
			continue
		}
		reason := Reason(perr)
		f.Attempts = append(f.Attempts, c.attemptOf(cand, perr.Status, reason))
		f.note(perr, reason)
		if p.Metrics != nil {
			p.Metrics.ProviderFailure.WithLabelValues(cand.Provider, cand.Model, reason).Inc()
		}
		p.log(ctx, "attempt failed", cand, perr, reason)
		if reason == "deadline" {
			f.DeadlineHit = true
			p.observe(cand, health.Neutral)
			return nil, true, false
		}
		retry429 := c.Opts.Retry429 && perr.Kind == provider.KindHTTP && perr.Status == http.StatusTooManyRequests
		if q, ok := health.Quota(perr.Status, perr.Body); ok && perr.Kind == provider.KindHTTP && !retry429 {
			p.pause(cand, perr, q, c.Opts.DefaultPause)
			tracePause(ctx, cand, q)
			p.observe(cand, health.Neutral)
			return nil, false, false
		}
		if retry429 {
			// The provider is alive and asking for less: not a breaker
			// failure, and no pause, so the same provider is tried again.
			p.observe(cand, health.Neutral)
		} else if !perr.Retryable() {
			// Not tried again here; a refused credential (the provider's
			// own key or token, never the client's) is this provider's
			// fault and counts toward its circuit.
			if credentialRefused(perr) {
				p.observe(cand, health.Failure)
			} else {
				p.observe(cand, health.Neutral)
			}
			return nil, false, perr.Kind == provider.KindHTTP && perr.Status >= 400 && perr.Status < 500
		} else {
			p.observe(cand, health.Failure)
		}
		if reason == "ttft_timeout" || reason == "first_byte_timeout" || reason == "stream_error" || reason == "empty_answer" {
			return nil, false, false // fall back at once: this provider is slow or broken now
		}
		if attempt+1 >= c.Opts.MaxAttempts {
			break
		}
		if p.Health != nil && !p.Health.Available(cand.Provider) && len(c.Route.Candidates) > 1 {
			traceCircuit(ctx, cand.Provider, "opened")
			return nil, false, false // its circuit just opened; others may serve
		}
		wait := p.backoff(attempt, c.Opts)
		var body []byte
		if retry429 {
			body = perr.Body // a 429's JSON may state its reset (retry_after_ms, reset_at)
		}
		if d, ok := health.StatedWait(perr.Header, body, p.Clock.Now()); ok {
			wait = min(d, c.Opts.MaxBackoff)
		}
		if p.Clock.Now().Add(wait).After(deadline) {
			return nil, false, false // not started: the next provider may need no wait
		}
		traceRetry(ctx, cand, attempt, reason, wait)
		if !p.wait(ctx, wait, deadline, f) {
			return nil, true, false
		}
	}
	return nil, false, false
}

// attempt admits, sends once and, for streams, reads until the first
// token; the admission is settled on every outcome but a committed stream,
// whose relay settles it.
func (p *Proxy) attempt(ctx context.Context, c *Call, cand *route.Candidate, deadline time.Time, retry int) (*Result, *provider.Error) {
	req, native, strip, perr := p.request(c, cand)
	if perr != nil {
		return nil, perr
	}
	ctx, sp := p.traceAttempt(ctx, c, cand, req, retry)
	var pm *admit.Permit
	if p.Admission != nil {
		// Estimates and prices come from the body the provider will send:
		// a translating provider's native one (made once, reused by Send).
		ep, body := string(req.Endpoint), req.Body
		if n, ok := cand.Send.(provider.Natively); ok {
			if nep, nb, ok := n.NativeBody(req); ok {
				ep, body = nep, nb
			}
		}
		var ref *admit.Refusal
		pm, ref = p.Admission.Admit(ctx, admit.AttemptInfo{Identity: c.Identity, Provider: cand.Provider,
			ProviderType: cand.Type, Model: cand.Model, ClientModel: c.ClientModel, Endpoint: ep, Body: body,
			NoWait: c.side.noWait()})
		traceAdmission(sp, pm, ref)
		if ref != nil {
			return nil, &provider.Error{Kind: provider.KindRefused, Status: ref.Status, Msg: ref.Message, Err: ref}
		}
	}
	c.side.admitted(pm)
	if pm != nil && ctx.Err() != nil {
		// Canceled while it was admitted (a hedge whose race was decided
		// meanwhile, a client that left): nothing was sent, nothing is
		// owed.
		pm.Fail()
		return nil, &provider.Error{Kind: provider.KindCanceled, Msg: "canceled before the send", Err: context.Cause(ctx)}
	}
	hold := p.Buffers.Hold()
	busy := p.Busy.Begin(cand.Provider)
	res, perr := p.send(provider.WithHold(ctx, hold), c, cand, req, native, deadline)
	if perr == nil {
		res.busy = busy // until the answer is relayed (Close)
	} else {
		busy()
	}
	if perr == nil && res.Events == nil {
		res.hold = hold                                             // released once the answer is relayed (Close)
		res.Usage = track.Unary(ProtocolOf(req.Endpoint), res.Body) // once, for every reader
	} else {
		hold.Release()
	}
	switch {
	case pm == nil:
	case perr == nil && res.Events != nil:
		res.Permit, res.StripUsage = pm, strip
		res.proto = ProtocolOf(req.Endpoint)
		res.bound = newBound(res.proto, pm.OutputBound())
	case perr == nil:
		p.settleUnary(ctx, pm, res, req.Endpoint)
		res.Permit = pm // settled; kept for its advisory headers
	case perr.Kind == provider.KindHTTP || perr.Kind == provider.KindStaleConn:
		switch u, charged, partial := errorCharge(req.Endpoint, perr.Body); {
		case charged:
			// The provider says it billed this failure: it is charged,
			// before any retry and whatever the client finally gets.
			pm.Settle(u)
		case partial:
			// Usage without its required counters may raise the hold,
			// never release it.
			pm.Partial(u)
			pm.Keep()
		default:
			// A definite refusal before generation: providers do not bill it.
			pm.Fail()
		}
		// An upstream 429 slows that provider's own buckets down; with
		// several keys only the key that got it is paused (see health).
		if perr.Status == 429 && cand.RateLimited && len(cand.Keys) <= 1 {
			if d, ok := health.StatedWait(perr.Header, perr.Body, p.Clock.Now()); ok {
				p.Admission.Penalize(cand.Provider, d)
			} else {
				p.Admission.Penalize(cand.Provider)
			}
		}
	case c.side.lost(ctx):
		// A hedge that lost the race, canceled by the gateway on purpose
		// before it answered: charged its input and the in-flight margin,
		// not its whole reservation.
		pm.Lose(admit.Usage{Input: pm.InputBound()})
	default:
		// Sent, outcome unknown (timeout, cut, cancel): keep the hold.
		pm.Keep()
	}
	if perr == nil && res.Events != nil {
		res.StripUsage = strip
	}
	traceOutcome(sp, res, perr, pm)
	return res, perr
}

// settleUnary ends a unary answer's admission: on its usage when the
// required counters are there (input and output, explicit zeros
// counting; input alone for embeddings) or the provider stated a bill;
// otherwise what it reported may raise the hold, which stays. Output
// past the reservation's bound is charged in full, counted and logged.
func (p *Proxy) settleUnary(ctx context.Context, pm *admit.Permit, res *Result, ep provider.Endpoint) {
	u := res.Usage
	su := SpendUsage(u)
	su.CostNanoUSD = spend.ReportedBill(res.Body)
	switch {
	case u.Complete(ep == provider.Embeddings) || su.CostNanoUSD != nil:
		if pm.OverBound(su) {
			p.logBound(ctx, res, "answer's output passed its bound: charged in full", su.Output, pm.OutputBound())
		}
		pm.Settle(su)
	case u.Known:
		pm.Partial(su)
		pm.Keep()
	default:
		pm.Keep()
	}
}

// errorCharge reads a (bounded) error body for usage or a provider bill:
// some providers bill a failed request (a cut generation, a failed
// repair) and say so in the error answer. charged: complete usage or a
// bill; partial: usage missing a required counter.
func errorCharge(ep provider.Endpoint, body []byte) (u admit.Usage, charged, partial bool) {
	if len(body) == 0 || !bytes.Contains(body, []byte(`"usage"`)) {
		return admit.Usage{}, false, false
	}
	bill := spend.ReportedBill(body)
	tu := track.Unary(ProtocolOf(ep), body)
	u = SpendUsage(tu)
	u.CostNanoUSD = bill
	switch {
	case tu.Complete(ep == provider.Embeddings) || bill != nil:
		return u, true, false
	case tu.Known:
		return u, false, true
	}
	return admit.Usage{}, false, false
}

// SpendUsage converts measured usage to the ledger's form.
func SpendUsage(u track.Usage) admit.Usage {
	return admit.Usage{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite, Reasoning: u.Reasoning}
}

// ProtocolOf is the stream protocol an endpoint answers in.
func ProtocolOf(ep provider.Endpoint) track.Protocol {
	switch ep {
	case provider.GenerateContent:
		return track.Gemini
	case provider.Completions:
		return track.Completions
	case provider.Responses:
		return track.Responses
	case provider.Messages:
		return track.Messages
	}
	return track.Chat
}

// send makes one attempt and, for streams, reads until the first token.
func (p *Proxy) send(ctx context.Context, c *Call, cand *route.Candidate, req *provider.Request, native bool, deadline time.Time) (*Result, *provider.Error) {
	actx, cancel := context.WithCancel(ctx)
	// One watcher bounds the attempt until it commits: the first-token
	// timeout for streams, and the overall deadline.
	limit := deadline.Sub(p.Clock.Now())
	if limit <= 0 {
		cancel()
		return nil, &provider.Error{Kind: provider.KindTimeout, Msg: "request deadline passed", Err: errDeadline}
	}
	why := errDeadline
	if c.Stream && c.Opts.TTFT > 0 && c.Opts.TTFT < limit {
		limit, why = c.Opts.TTFT, errTTFT
	}
	var fired atomic.Bool
	// A timer callback, not a goroutine per attempt.
	stopTimer := p.Clock.AfterFunc(limit, func() {
		fired.Store(true)
		cancel()
	})
	stopWatch := func() bool { return stopTimer() || !fired.Load() }
	var timeout func(perr *provider.Error) *provider.Error

	// Unary: a second timer up to the first response byte, stopped by
	// the transport's trace hook (or when Send returns, for providers
	// that do not speak HTTP).
	stopFirstByte := func() {}
	var firstByteFired atomic.Bool
	if !c.Stream && c.Opts.FirstByte > 0 && c.Opts.FirstByte < limit {
		stopFB := p.Clock.AfterFunc(c.Opts.FirstByte, func() {
			firstByteFired.Store(true)
			cancel()
		})
		var once sync.Once
		stopFirstByte = func() { once.Do(func() { stopFB() }) }
		actx = httptrace.WithClientTrace(actx, &httptrace.ClientTrace{GotFirstResponseByte: stopFirstByte})
	}
	timeout = func(perr *provider.Error) *provider.Error {
		switch {
		case firstByteFired.Load():
			return &provider.Error{Kind: provider.KindTimeout, Msg: errFirstByte.Error(), Err: errFirstByte}
		case fired.Load():
			return &provider.Error{Kind: provider.KindTimeout, Msg: why.Error(), Err: why}
		}
		return perr
	}

	if c.side != nil && !c.Stream {
		// A unary answer has begun (its status line): no further hedge.
		actx = httptrace.WithClientTrace(actx, &httptrace.ClientTrace{GotFirstResponseByte: c.side.gotHeaders})
	}
	sent := p.Clock.Now()
	resp, sendErr := cand.Send.Send(actx, req)
	stopFirstByte()
	if sendErr != nil {
		stopWatch()
		var perr *provider.Error
		if !errors.As(sendErr, &perr) {
			perr = provider.TransportError(actx, sendErr) // before cancel, as below
		}
		cancel()
		perr = timeout(perr)
		perr.KeyIndex = req.KeyIndex
		return nil, perr
	}
	res := &Result{Candidate: cand, Native: native, Status: resp.Status, Header: resp.Header, Sent: sent}
	if !resp.Stream {
		c.side.gotHeaders()
		checked := false
		if b, ok := resp.Body.(*provider.Buffered); ok {
			_, checked = b.Bytes()
		}
		body, rerr := provider.ReadUnary(actx, resp.Body)
		stopWatch()
		cancel()
		if rerr != nil {
			var perr *provider.Error
			errors.As(rerr, &perr)
			return nil, timeout(perr)
		}
		if !checked && !jsoncheck.Valid(body) {
			// A 200 with HTML or a truncated document is the provider's
			// failure, not an answer to relay.
			return nil, &provider.Error{Kind: provider.KindBadResponse, Status: resp.Status, Msg: "upstream answer is not valid JSON"}
		}
		if !isObject(body) {
			// Every answer of every supported API is an object; an array,
			// string or null is as broken as HTML.
			return nil, &provider.Error{Kind: provider.KindBadResponse, Status: resp.Status, Msg: "upstream answer is not a JSON object"}
		}
		if c.Native != nil && !native && !hasChoice(body) {
			// A Messages client's answer translated from a chat answer
			// with no choice would be an empty message that counts as
			// served; as with an empty stream, the next provider serves.
			return nil, &provider.Error{Kind: provider.KindBadResponse, Status: resp.Status,
				Msg: "upstream chat answer has no choices"}
		}
		res.Body = body
		return res, nil
	}
	rd := sse.NewReader(resp.Body)
	res.Events, res.body, res.cancel = rd, resp.Body, cancel
	if !c.Opts.Inspect {
		stopWatch()
		res.FirstToken = p.Clock.Now()
		return res, nil
	}
	gate := GateFor(req.Endpoint)
	held := 0
	for {
		ev, rerr := rd.Next()
		if rerr != nil {
			stopWatch()
			// Classified before Close, which cancels actx: a read error
			// read as the client's cancellation would spare the provider.
			var perr *provider.Error
			switch {
			case rerr == io.EOF || errors.Is(rerr, io.ErrUnexpectedEOF):
				perr = timeout(&provider.Error{Kind: provider.KindTransport, Msg: "stream ended before the first token", Err: errEmptyStream})
			case errors.Is(rerr, sse.ErrTooLong):
				perr = &provider.Error{Kind: provider.KindBadResponse, Msg: "stream event too large"}
			default:
				perr = timeout(provider.TransportError(actx, rerr))
			}
			res.Close()
			return nil, perr
		}
		switch gate(&ev) {
		case Fail:
			stopWatch()
			res.Close()
			return nil, &provider.Error{Kind: provider.KindBadResponse, Status: resp.Status, Body: append([]byte(nil), ev.Data...),
				Msg: "error event before the first token", Err: errStreamError}
		case Empty:
			stopWatch()
			res.Close()
			return nil, &provider.Error{Kind: provider.KindBadResponse, Status: resp.Status,
				Msg: errEmptyAnswer.Error(), Err: errEmptyAnswer}
		case Commit:
			if !stopWatch() {
				// The timeout fired as the token arrived: the attempt's
				// context is already canceled.
				res.Close()
				return nil, timeout(&provider.Error{Kind: provider.KindTimeout, Msg: why.Error(), Err: why})
			}
			res.Held = append(res.Held, ev.Clone())
			res.FirstToken = p.Clock.Now()
			return res, nil
		}
		res.Held = append(res.Held, ev.Clone())
		held += len(ev.Raw)
		if held > maxHeld {
			stopWatch()
			res.FirstToken = p.Clock.Now()
			return res, nil
		}
	}
}

// optimistic makes sjson replace a "model" the body has in one copy (it
// finds it as the general path would, and falls back to that path when the
// body has none): the same bytes out, three allocations fewer.
var optimistic = &sjson.Options{Optimistic: true}

// request builds one attempt's provider request: the body with only
// "model" rewritten (plus include_usage when metering needs it), the
// entry's headers over the forwarded client headers.
func (p *Proxy) request(c *Call, cand *route.Candidate) (req *provider.Request, native, strip bool, _ *provider.Error) {
	ep, body := c.Endpoint, c.Body
	// The client's protocol is the provider's own (Anthropic to Anthropic,
	// a cloud's Claude included; Gemini to Gemini; Responses to OpenAI):
	// the client's body, untranslated.
	if c.Native != nil && TakesNative(c.NativeOf(), cand) {
		ep, body, native = c.NativeOf(), c.Native, true
	}
	if body == nil {
		// The client's request could not be translated (its handler found
		// a native provider to try first): this one cannot serve it.
		return nil, false, false, &provider.Error{Kind: provider.KindHTTP, Status: http.StatusBadRequest,
			Msg: "the request cannot be translated for provider type " + cand.Type, Body: untranslatable}
	}
	var err error
	switch {
	case ep == provider.GenerateContent || ep == provider.CountTokens:
		// Gemini names the model in the URL (the provider's req.Model).
	case cand.ModelJSON != nil:
		body, err = sjson.SetRawBytesOptions(body, "model", cand.ModelJSON, optimistic)
	default:
		body, err = sjson.SetBytesOptions(body, "model", cand.Model, optimistic)
	}
	if err != nil {
		return nil, false, false, &provider.Error{Kind: provider.KindBadResponse, Msg: "cannot rewrite model", Err: err}
	}
	if c.Native != nil && !native && DropsTopK(cand) && gjson.GetBytes(body, "top_k").Exists() {
		// A translated Anthropic or Gemini request's top_k: OpenAI's API
		// (and Azure's) refuses the field, and it is a sampling hint.
		body, _ = sjson.DeleteBytes(body, "top_k")
	}
	if c.Meter && c.Stream && ep == provider.Chat && (cand.Type == "openai" || cand.Type == "mock" || cand.Type == "azure") {
		body, strip = spend.WithStreamUsage(body)
	}
	// Providers only read these headers, so either set alone is shared.
	h := c.Header
	switch {
	case len(cand.Header) == 0:
	case len(c.Header) == 0:
		h = cand.Header
	default:
		h = make(http.Header, len(c.Header)+len(cand.Header))
		for k, v := range c.Header {
			h[k] = v
		}
		for k, v := range cand.Header {
			h[k] = v
		}
	}
	req = &provider.Request{Endpoint: ep, Body: body, Stream: c.Stream, Model: cand.Model, Header: h}
	if n := len(cand.Keys); n > 0 {
		i := 0
		if p.Health != nil {
			i = p.Health.PickKey(cand.Provider, n)
		}
		req.APIKey, req.KeyIndex = cand.Keys[i%n], i%n
	}
	return req, native, strip, nil
}

func (p *Proxy) observe(cand *route.Candidate, o health.Outcome) {
	if p.Health != nil {
		p.Health.Observe(cand.Provider, o)
	}
}

func (p *Proxy) pause(cand *route.Candidate, perr *provider.Error, reason string, def time.Duration) {
	if p.Health == nil {
		return
	}
	d, ok := health.StatedWait(perr.Header, perr.Body, p.Clock.Now())
	if !ok {
		d = def
	}
	p.Health.Pause(cand.Provider, perr.KeyIndex, len(cand.Keys), d, reason)
	if p.Metrics != nil {
		p.Metrics.QuotaPaused.WithLabelValues(cand.Provider, cand.Model, reason).Inc()
	}
}

// available filters order to providers that may take a request; when none
// may, all are tried (forced), in order.
func (p *Proxy) available(order []*route.Candidate) ([]*route.Candidate, bool) {
	if p.Health == nil {
		return order, false
	}
	var out []*route.Candidate // allocated only when one is left out
	for i, c := range order {
		switch ok := p.Health.Available(c.Provider); {
		case ok && out != nil:
			out = append(out, c)
		case !ok && out == nil:
			out = append(make([]*route.Candidate, 0, len(order)), order[:i]...)
		}
	}
	switch {
	case out == nil:
		return order, false // all available
	case len(out) == 0:
		return order, true
	}
	return out, false
}

// backoff is base·2^n·(0.5..1.0), capped.
func (p *Proxy) backoff(n int, o Options) time.Duration {
	j := 0.0
	if p.Jitter != nil {
		j = p.Jitter()
	} else {
		j = rand.Float64()
	}
	d := float64(o.BackoffBase) * float64(uint64(1)<<min(n, 30)) * (0.5 + 0.5*j)
	if d > float64(o.MaxBackoff) {
		return o.MaxBackoff
	}
	return time.Duration(d)
}

// roundWait is the inter-round backoff; when every provider is paused it
// waits for the earliest pause to end instead (capped), so that a single
// provider with a short Retry-After is simply waited for.
func (p *Proxy) roundWait(round int, order []*route.Candidate, o Options) time.Duration {
	wait := p.backoff(round-1, o)
	if p.Health == nil {
		return wait
	}
	now := p.Clock.Now()
	var earliest time.Time
	for _, c := range order {
		st := p.Health.Status(c.Provider)
		if st.PausedUntil.IsZero() {
			return wait
		}
		if earliest.IsZero() || st.PausedUntil.Before(earliest) {
			earliest = st.PausedUntil
		}
	}
	if d := earliest.Sub(now); d > wait {
		wait = min(d, o.MaxBackoff)
	}
	return wait
}

// wait sleeps d on the injected clock unless that would pass the deadline
// or the client leaves; false means stop.
func (p *Proxy) wait(ctx context.Context, d time.Duration, deadline time.Time, f *Failure) bool {
	if p.Clock.Now().Add(d).After(deadline) {
		f.DeadlineHit = true
		return false
	}
	if d <= 0 {
		return true
	}
	t, stop := p.Clock.After(d)
	defer stop()
	select {
	case <-t:
		return true
	case <-ctx.Done():
		f.Canceled = true
		return false
	}
}

// logRefusedRetry notes a retry or fallback the gateway refused after the
// providers had failed.
func (p *Proxy) logRefusedRetry(ctx context.Context, c *Call, cand *route.Candidate, ref *admit.Refusal) {
	if p.Log == nil {
		return
	}
	p.Log.LogAttrs(ctx, slog.LevelInfo, "retry refused after the providers failed; answering their failure",
		slog.String("provider", cand.Provider), slog.String("tenant", c.Identity.Label()), slog.String("reason", ref.Code))
}

// noteFit makes ref the failure's refusal, except that of two budget
// refusals suggesting an output limit the larger suggestion stands: it
// fits the provider that made it, and the others are tried too.
func (f *Failure) noteFit(ref *admit.Refusal) {
	if old := f.Refusal; old != nil && old.Code == admit.CodeRequestTooCostly && ref.Code == admit.CodeRequestTooCostly &&
		old.Fit > ref.Fit {
		return
	}
	f.Refusal = ref
}

func (p *Proxy) log(ctx context.Context, msg string, cand *route.Candidate, perr *provider.Error, reason string) {
	if p.Log == nil {
		return
	}
	p.Log.LogAttrs(ctx, slog.LevelWarn, msg, slog.String("provider", cand.Provider),
		slog.Int("status", perr.Status), slog.String("reason", reason), slog.String("error", perr.Error()))
}

// serving is order without the providers that cannot serve ep (an
// Anthropic or Gemini one for /v1/responses): their refusal would only
// stand in for the real failure of the others, as a 400. When none can,
// order is kept and their own unsupported_endpoint answer is the answer.
func serving(order []*route.Candidate, ep provider.Endpoint) []*route.Candidate {
	n := 0
	for _, c := range order {
		if provider.Serves(c.Send, ep) {
			n++
		}
	}
	if n == 0 || n == len(order) {
		return order
	}
	out := make([]*route.Candidate, 0, n)
	for _, c := range order {
		if provider.Serves(c.Send, ep) {
			out = append(out, c)
		}
	}
	return out
}

var untranslatable = []byte(`{"error":{"message":"the request uses fields that only its own vendor's API serves, and this provider speaks another protocol","type":"invalid_request_error","param":null,"code":"untranslatable"}}`)

// DropsTopK reports whether a translated request's top_k is left out for
// cand: OpenAI's chat API and Azure's refuse the field.
func DropsTopK(cand *route.Candidate) bool { return cand.Type == "openai" || cand.Type == "azure" }

// NativeOf is the protocol of the call's Native body.
func (c *Call) NativeOf() provider.Endpoint {
	if c.NativeEndpoint == "" {
		return provider.Messages
	}
	return c.NativeEndpoint
}

// TakesNative reports whether cand takes a body of protocol ep
// untranslated: Messages an anthropic provider (or a cloud for Claude),
// GenerateContent a gemini provider, Responses a provider that serves
// the Responses API itself (openai, azure, mock).
func TakesNative(ep provider.Endpoint, cand *route.Candidate) bool {
	switch ep {
	case provider.Messages:
		return cand.Type == "anthropic" || provider.TakesMessages(cand.Send, cand.Model)
	case provider.GenerateContent:
		return cand.Type == "gemini"
	case provider.Responses:
		return provider.Serves(cand.Send, provider.Responses)
	}
	return false
}

// DefaultOrder is the route's primary first, then config order.
func DefaultOrder(r *route.Route) []*route.Candidate {
	if r.Primary == 0 {
		return r.Candidates
	}
	out := make([]*route.Candidate, 0, len(r.Candidates))
	out = append(out, r.Candidates[r.Primary])
	for i, c := range r.Candidates {
		if i != r.Primary {
			out = append(out, c)
		}
	}
	return out
}

// hasChoice reports whether a chat answer has at least one choice.
func hasChoice(body []byte) bool {
	return len(gjson.GetBytes(body, "choices").Array()) > 0
}

// isObject reports whether a valid JSON document is an object.
func isObject(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '{'
	}
	return false
}
