package proxy

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"switchboard/internal/admit"
	"switchboard/internal/route"
)

// Hedge is one request's hedging ("The Tail at Scale"): when the running
// attempt has not committed (no first token of a stream, no response
// headers of a unary call) after a delay, an extra attempt starts on the
// next available provider; the first to commit is the answer and the
// others are canceled at once.
type Hedge struct {
	// After is the fixed delay, used when Percentile is 0.
	After time.Duration
	// Percentile (0 < q < 1) takes the delay from the running provider's
	// measured TTFT (Proxy.Stats); with too few samples there is no hedge.
	Percentile float64
	// MaxExtra bounds the extra attempts of one race (1..3).
	MaxExtra int
}

// minHedgeDelay keeps a percentile of very fast samples from hedging at
// once.
const minHedgeDelay = time.Millisecond

// WaitHedges waits until every decided race has settled its losers
// (canceled, their permits finished, counted and logged).
func (p *Proxy) WaitHedges() { p.hedges.Wait() }

// side is one attempt of a race, the original or a hedge, running the
// ordinary per-provider attempts (tryProvider) in its own goroutine on its
// own copy of the Call and its own Failure. Its fields (but started) are
// the goroutine's until it reports on race.done; the race reads them after.
type side struct {
	r      *race
	cand   *route.Candidate
	hedge  bool
	cancel context.CancelFunc
	f      Failure
	// started: an attempt was admitted (a hedge refused by admission was
	// never started and leaves no trace in the failure). Atomic: the
	// commit point reads it while the side may still be running.
	started atomic.Bool
	// beaten: another side won the race and the commit canceled this one.
	beaten  atomic.Bool
	permits []*admit.Permit
}

// lost reports whether this side's attempt ended because another side
// won: the gateway canceled it on purpose (a client that left before the
// commit leaves no winner; one that leaves after it finds the losers
// already canceled). ctx is the side's.
func (s *side) lost(ctx context.Context) bool {
	return s != nil && s.beaten.Load() && ctx.Err() != nil
}

// noWait: a hedge does not queue for a full provider's slot.
func (s *side) noWait() bool { return s != nil && s.hedge }

// admitted records an attempt's admission (pm is nil without admission).
func (s *side) admitted(pm *admit.Permit) {
	if s == nil {
		return
	}
	if !s.started.Swap(true) && s.hedge {
		if m := s.r.p.Metrics; m != nil {
			m.Hedge.Started.WithLabelValues(s.r.model(), s.cand.Provider).Inc()
		}
	}
	if pm != nil {
		s.permits = append(s.permits, pm)
	}
}

// gotHeaders notes a unary attempt's first response byte (or, for an
// in-process provider, its answer): the provider is answering, so no
// further hedge is started.
func (s *side) gotHeaders() {
	if s != nil {
		s.r.answeredOnce.Do(func() { close(s.r.answered) })
	}
}

type outcome struct {
	s               *side
	res             *Result
	stop, clientErr bool
}

// race is one hedged tryProvider: the original side and up to MaxExtra
// hedges. Its loop, in the request's goroutine, is the single commit
// point: the first side to hand back a Result is the answer.
type race struct {
	p            *Proxy
	c            *Call
	deadline     time.Time
	delay        time.Duration
	began        time.Time
	sides        []*side
	done         chan outcome
	answered     chan struct{}
	answeredOnce sync.Once
}

// hedgeDelay is when to start an extra attempt next to one on cand.
func (p *Proxy) hedgeDelay(c *Call, cand *route.Candidate) (time.Duration, bool) {
	h := c.Opts.Hedge
	if h.Percentile == 0 {
		return max(h.After, minHedgeDelay), true
	}
	if p.Stats == nil || c.Route == nil || c.Route.Model == nil {
		return 0, false
	}
	d, ok := p.Stats.TTFTPercentile(c.Route.Model.Name, cand.Provider, h.Percentile)
	return max(d, minHedgeDelay), ok
}

// race runs tryProvider on first, hedged with the candidates of rest; it
// returns tryProvider's results and the candidates hedges were sent to
// (tried in this round: the loop skips them).
func (p *Proxy) race(ctx context.Context, c *Call, first *route.Candidate, rest []*route.Candidate,
	deadline time.Time, f *Failure) (res *Result, stop, clientErr bool, used []*route.Candidate) {
	delay, ok := p.hedgeDelay(c, first)
	if !ok {
		res, stop, clientErr = p.tryProvider(ctx, c, first, deadline, f)
		return res, stop, clientErr, nil
	}
	h := c.Opts.Hedge
	r := &race{p: p, c: c, deadline: deadline, delay: delay, done: make(chan outcome, 1+len(rest)),
		answered: make(chan struct{}), began: p.Clock.Now()}
	r.start(ctx, first, false)
	running, extra, next := 1, 0, 0
	// launch starts a hedge on the next candidate that may take one: not
	// paused, circuit not open (nor half-open: a probe is not a hedge).
	launch := func() bool {
		for next < len(rest) {
			cand := rest[next]
			next++
			if p.Health != nil && (p.Health.Status(cand.Provider).CircuitOpen || !p.Health.Begin(cand.Provider, false)) {
				continue
			}
			r.start(ctx, cand, true)
			traceHedge(ctx, "started", cand.Provider, delay)
			running++
			extra++
			return true
		}
		return false
	}
	timer, stopTimer := p.Clock.After(delay)
	defer func() { stopTimer() }()
	answered := r.answered
	var failed []outcome
	for {
		select {
		case o := <-r.done:
			running--
			if o.res != nil {
				r.commit(ctx, o, running)
				return o.res, false, false, r.hedged()
			}
			if o.s.hedge && !o.s.started.Load() {
				// Refused by admission before anything was sent (no slot,
				// rate, or no budget for both reservations): no hedge
				// here; the next candidate may take it.
				o.s.cancel()
				extra--
				p.logHedge(ctx, slog.LevelDebug, "hedge not started", c, o.s.cand, slog.String("why", refusalOf(&o.s.f)))
				launch()
			} else {
				failed = append(failed, o)
			}
			if running == 0 {
				stop, clientErr = r.fail(f, failed)
				r.report(ctx, nil, nil)
				return nil, stop, clientErr, r.hedged()
			}
		case <-timer:
			timer = nil
			switch {
			case extra >= h.MaxExtra:
			case !launch():
				p.logHedge(ctx, slog.LevelDebug, "hedge not started", c, first, slog.String("why", "no other provider available"))
			case extra < h.MaxExtra:
				stopTimer()
				timer, stopTimer = p.Clock.After(delay)
			}
		case <-answered:
			answered, timer = nil, nil
			stopTimer()
		}
	}
}

// start runs one side.
func (r *race) start(ctx context.Context, cand *route.Candidate, hedge bool) {
	sctx, cancel := context.WithCancel(ctx)
	s := &side{r: r, cand: cand, hedge: hedge, cancel: cancel}
	r.sides = append(r.sides, s)
	cc := *r.c
	cc.side = s
	go func() {
		res, stop, clientErr := r.p.tryProvider(sctx, &cc, cand, r.deadline, &s.f)
		r.done <- outcome{s: s, res: res, stop: stop, clientErr: clientErr}
	}()
}

// hedged lists the candidates hedges were sent to.
func (r *race) hedged() []*route.Candidate {
	var out []*route.Candidate
	for _, s := range r.sides {
		if s.hedge && s.started.Load() {
			out = append(out, s.cand)
		}
	}
	return out
}

// commit makes win the answer: every other side is canceled at once, and
// the losers still running are settled in the background.
func (r *race) commit(ctx context.Context, win outcome, running int) {
	for _, s := range r.sides {
		if s != win.s {
			s.beaten.Store(true)
			s.cancel()
		}
	}
	// The winner's context lives as long as its answer.
	prev := win.res.cancel
	win.res.cancel = func() {
		if prev != nil {
			prev()
		}
		win.s.cancel()
	}
	if len(r.hedged()) == 0 {
		return // no hedge was sent: nothing to count
	}
	by := "original"
	if win.s.hedge {
		by = "hedge"
		r.censored()
	}
	traceHedge(ctx, "won_by_"+by, win.s.cand.Provider, r.p.Clock.Now().Sub(r.began))
	if m := r.p.Metrics; m != nil {
		m.Hedge.Won.WithLabelValues(r.model(), win.s.cand.Provider, by).Inc()
	}
	r.p.hedges.Add(1)
	go func() {
		defer r.p.hedges.Done()
		var losers []*side
		for ; running > 0; running-- {
			o := <-r.done
			if o.res != nil {
				// It committed too, a moment late: never relayed; charged
				// what it had produced, as a loser.
				if o.res.Permit != nil && o.res.Events != nil {
					o.res.Permit.Lose(producedOf(o.res))
				}
				o.res.Close()
			}
			if o.s.started.Load() {
				losers = append(losers, o.s)
				o.s.wasted(o.res)
			}
		}
		r.report(context.WithoutCancel(ctx), win.s, losers) // the request's id, not its end
	}()
}

// censored records the original's TTFT as the time it had waited when a
// hedge beat it: a lower bound, but without it the provider's samples
// would hold only the answers fast enough to win, and a percentile delay
// read from them would drift down and hedge more and more requests.
func (r *race) censored() {
	if !r.c.Stream || r.p.Stats == nil || r.c.Route == nil || r.c.Route.Model == nil {
		return
	}
	waited := r.p.Clock.Now().Sub(r.began)
	r.p.Stats.Record(r.c.Route.Model.Name, r.sides[0].cand.Provider, route.Sample{TTFT: waited.Seconds(), Censored: true})
}

// wasted counts what a losing side cost: the tokens a late answer
// reported, and its attempts' settled (a loser's known cost) or kept
// nano-USD.
func (s *side) wasted(late *Result) {
	m := s.r.p.Metrics
	if m == nil {
		return
	}
	var cost int64
	for _, pm := range s.permits {
		cost += pm.Cost()
	}
	model := s.r.model()
	if cost > 0 {
		m.Hedge.WastedNanoUSD.WithLabelValues(model, s.cand.Provider).Add(float64(cost))
	}
	if late != nil && late.Usage.Known {
		if t := SpendUsage(late.Usage).Tokens(); t > 0 {
			m.Hedge.WastedTokens.WithLabelValues(model, s.cand.Provider).Add(float64(t))
		}
	}
}

// fail merges the sides' failures into f in the order they ended, as if
// their attempts had run one after another.
func (r *race) fail(f *Failure, failed []outcome) (stop, clientErr bool) {
	clientErr = true
	for _, o := range failed {
		sf := &o.s.f
		f.Attempts = append(f.Attempts, sf.Attempts...)
		f.Skipped = append(f.Skipped, sf.Skipped...)
		f.seen.add(sf.seen)
		f.DeadlineHit = f.DeadlineHit || sf.DeadlineHit
		f.Canceled = f.Canceled || sf.Canceled
		if sf.Last != nil {
			f.Last = sf.Last
		}
		f.Refusal = sf.Refusal
		stop = stop || o.stop
		clientErr = clientErr && o.clientErr
	}
	return stop, clientErr
}

// report writes the race's one log line (none when no hedge started).
func (r *race) report(ctx context.Context, win *side, losers []*side) {
	if r.p.Log == nil {
		return
	}
	var hedges []string
	for _, c := range r.hedged() {
		hedges = append(hedges, c.Provider)
	}
	if len(hedges) == 0 {
		return
	}
	winner, by := "", "none"
	if win != nil {
		winner, by = win.cand.Provider, "original"
		if win.hedge {
			by = "hedge"
		}
	}
	var cost int64
	lost := make([]string, 0, len(losers))
	for _, s := range losers {
		lost = append(lost, s.cand.Provider)
		for _, pm := range s.permits {
			cost += pm.Cost()
		}
	}
	r.p.Log.LogAttrs(ctx, slog.LevelInfo, "hedge", slog.String("model", r.model()),
		slog.String("original", r.sides[0].cand.Provider), slog.Any("hedges", hedges),
		slog.Duration("after", r.delay), slog.String("winner", winner), slog.String("won_by", by),
		slog.Any("canceled", lost), slog.Int64("wasted_nano_usd", cost))
}

func (r *race) model() string { return modelOf(r.c) }

// modelOf is the call's configured model name, the metrics' label.
func modelOf(c *Call) string {
	if c.Route != nil && c.Route.Model != nil {
		return c.Route.Model.Name
	}
	return c.ClientModel
}

func (p *Proxy) logHedge(ctx context.Context, lvl slog.Level, msg string, c *Call, cand *route.Candidate, attrs ...slog.Attr) {
	if p.Log == nil {
		return
	}
	p.Log.LogAttrs(ctx, lvl, msg, append([]slog.Attr{slog.String("model", modelOf(c)), slog.String("provider", cand.Provider)}, attrs...)...)
}

// refusalOf names why a side was never started.
func refusalOf(f *Failure) string {
	switch {
	case f.Refusal != nil:
		return f.Refusal.Code
	case f.Canceled:
		return "canceled"
	}
	return "refused"
}
