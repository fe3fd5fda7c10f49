package route

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"switchboard/internal/clock"
	"switchboard/internal/health"
	"switchboard/internal/provider"
	"switchboard/internal/sse"
	"switchboard/internal/track"
)

// ProbeTimeout bounds one probe.
const ProbeTimeout = 30 * time.Second

// probePrompt is fixed and short so that probes cost little and compare
// like with like.
const probePrompt = "Count from 1 to 20, separated by spaces."

// Prober measures the providers a model is not using, in the background,
// every ProbeInterval requests of the model, and auto-switches the active
// provider when a challenger is clearly better.
type Prober struct {
	Stats  *Stats
	Health *health.Registry
	Clock  clock.Clock
	Log    *slog.Logger
	// OnProbe is told each probe's outcome (metrics); nil = ignored.
	OnProbe func(model, provider string, ok bool)
	// OnSwitch is told each auto-switch (persistence, logs); nil = ignored.
	OnSwitch func(model, from, to string)
	// Serving names the provider a model's requests go to now, measured by
	// its own traffic and so not probed (the first choice of its routing
	// policy); nil = the measured active provider.
	Serving func(r *Route) string

	maxPerMinute atomic.Int64 // 0 = unlimited
	mu           sync.Mutex
	launches     []time.Time // sliding minute over all models
	wg           sync.WaitGroup
}

// SetMaxPerMinute sets performance.probe_max_per_minute (0 = unlimited).
func (p *Prober) SetMaxPerMinute(n int) { p.maxPerMinute.Store(int64(n)) }

// AfterRequest counts a request of r's model and, when it is time, starts
// a probe round in the background. It never blocks the request.
func (p *Prober) AfterRequest(r *Route) {
	n := p.Stats.CountRequest(r.Model.Name)
	if !r.Probing || len(r.Candidates) < 2 || r.ProbeInterval <= 0 || n%int64(r.ProbeInterval) != 0 {
		return
	}
	p.Probe(r)
}

// Probe starts a probe round for r unless one is running. It returns
// false when nothing was started.
func (p *Prober) Probe(r *Route) bool {
	m := p.Stats.model(r.Model.Name)
	if !m.probing.CompareAndSwap(false, true) {
		return false
	}
	sel := Measured{Stats: p.Stats}
	active := sel.Active(r)
	if p.Serving != nil {
		active = p.Serving(r)
	}
	var targets []*Candidate
	for _, c := range r.Candidates {
		// The serving provider is measured by its own traffic; it is
		// probed only while it has too few samples to compare.
		if c.Provider == active && p.Stats.Metrics(r.Model.Name, active).Scored {
			continue
		}
		if p.Health != nil && !p.Health.Available(c.Provider) {
			continue
		}
		targets = append(targets, c)
	}
	targets = targets[:p.take(len(targets))]
	if len(targets) == 0 {
		m.probing.Store(false)
		return false
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer m.probing.Store(false)
		var wg sync.WaitGroup
		for _, c := range targets {
			wg.Add(1)
			go func(c *Candidate) {
				defer wg.Done()
				smp, ok := p.probeOne(r, c)
				p.Stats.Record(r.Model.Name, c.Provider, smp)
				if p.OnProbe != nil {
					p.OnProbe(r.Model.Name, c.Provider, ok)
				}
			}(c)
		}
		wg.Wait()
		if !r.AutoSwitch {
			return
		}
		cur := sel.Active(r)
		if best, sw := p.Stats.Best(r, cur); sw {
			p.Stats.SetActive(r.Model.Name, best)
			if p.Log != nil {
				p.Log.Info("auto-switch", "model", r.Model.Name, "from", cur, "to", best,
					"from_score", p.Stats.Metrics(r.Model.Name, cur).Score, "to_score", p.Stats.Metrics(r.Model.Name, best).Score)
			}
			if p.OnSwitch != nil {
				p.OnSwitch(r.Model.Name, cur, best)
			}
		}
	}()
	return true
}

// Wait blocks until running probe rounds end (shutdown, tests).
func (p *Prober) Wait() { p.wg.Wait() }

// take reserves up to n launches in the sliding minute.
func (p *Prober) take(n int) int {
	limit := int(p.maxPerMinute.Load())
	if limit <= 0 {
		return n
	}
	now := p.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	cut := now.Add(-time.Minute)
	kept := p.launches[:0]
	for _, t := range p.launches {
		if t.After(cut) {
			kept = append(kept, t)
		}
	}
	p.launches = kept
	n = min(n, limit-len(p.launches))
	if n < 0 {
		n = 0
	}
	for i := 0; i < n; i++ {
		p.launches = append(p.launches, now)
	}
	return n
}

// probeOne sends the fixed streamed prompt and measures it. A failure is a
// sample with infinite TTFT, so a broken provider scores zero on TTFT.
func (p *Prober) probeOne(r *Route, c *Candidate) (Sample, bool) {
	failed := Sample{TTFT: math.Inf(1), TS: p.Clock.Now()}
	body, _ := json.Marshal(map[string]any{
		"model": c.Model, "stream": true, "max_tokens": 100,
		"messages": []map[string]string{{"role": "user", "content": probePrompt}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), ProbeTimeout)
	defer cancel()
	req := &provider.Request{Endpoint: provider.Chat, Body: body, Stream: true, Model: c.Model, Header: c.Header}
	if len(c.Keys) > 0 {
		i := 0
		if p.Health != nil {
			i = p.Health.PickKey(c.Provider, len(c.Keys))
		}
		req.APIKey, req.KeyIndex = c.Keys[i%len(c.Keys)], i%len(c.Keys)
	}
	start := p.Clock.Now()
	resp, err := c.Send.Send(ctx, req)
	if err != nil {
		p.logFailure(r, c, err)
		return failed, false
	}
	defer resp.Body.Close()
	st := track.NewStream(track.Chat, start)
	if !resp.Stream {
		// A provider that ignored stream: true still answered.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, provider.MaxUnaryBody))
		u := track.Unary(track.Chat, b)
		lat := p.Clock.Now().Sub(start).Seconds()
		if !u.Known || u.Output == 0 || lat <= 0 {
			return failed, false
		}
		return Sample{TTFT: lat, TPS: float64(u.Output) / lat, Tokens: int(u.Output), TS: p.Clock.Now()}, true
	}
	rd := sse.NewReader(resp.Body)
	for {
		ev, err := rd.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				p.logFailure(r, c, err)
				return failed, false
			}
			break
		}
		st.See(&ev, p.Clock.Now())
	}
	res := st.Result()
	if res.TTFT <= 0 || res.Tokens == 0 {
		return failed, false
	}
	return Sample{TTFT: res.TTFT.Seconds(), TPS: res.TotalTPS, Tokens: res.Tokens, TS: p.Clock.Now()}, true
}

func (p *Prober) logFailure(r *Route, c *Candidate, err error) {
	if p.Log != nil {
		p.Log.Warn("probe failed", "model", r.Model.Name, "provider", c.Provider, "error", err.Error())
	}
}
