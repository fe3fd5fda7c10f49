package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The board modes measure what independent benchmark boards publish
// (issue 28): the latency a proxy adds at concurrency 1, in µs; the most
// requests/s whose p99 stays under a bound, from one concurrency sweep;
// resident memory under 64 concurrent requests of 4 KB; and how many
// paced streams are held without a stall under the gateway's default
// limits. Unmetered and metered, with the proxies pinned to one core and
// the load generator, upstream and Redis to the other where taskset is
// available, so that a proxy's figures are what one core gives it.

// kindSweep is a closed loop run once per concurrency of Mode.Sweep.
const kindSweep = "sweep"

// liftedLimits is the end of every bench config: the bare proxy has no
// concurrency limit, so the comparison lifts the gateway's, except in a
// DefaultLimits mode, which measures the default itself.
const liftedLimits = `limits:
  max_concurrency: 20000
`

// frontierBounds are the p99 bounds of the throughput frontier, in ms.
var frontierBounds = []float64{1, 5, 10, 50}

// SweepPoint is one concurrency level of a sweep against one target.
type SweepPoint struct {
	Conc    int     `json:"concurrency"`
	RPS     float64 `json:"rps"`
	P50     float64 `json:"p50_ms"`
	P99     float64 `json:"p99_ms"`
	OK      int64   `json:"ok"`
	Errors  int64   `json:"errors"`
	NotSent int64   `json:"not_sent"`
}

// FrontierPoint is the most requests/s of a sweep whose p99 stayed under
// P99BoundMs with no failed request (0 when no level did), and the
// concurrency that gave it.
type FrontierPoint struct {
	P99BoundMs float64 `json:"p99_bound_ms"`
	RPS        float64 `json:"rps"`
	Conc       int     `json:"concurrency"`
}

// boardPlan is the board modes; smoke shrinks them to a fraction of a
// second each.
func boardPlan(smoke bool) []Mode {
	c1, step, sweep := 6*time.Second, 1500*time.Millisecond, []int{1, 2, 4, 8, 16, 32, 64, 128}
	held, tokens := 512, 64
	if smoke {
		c1, step, sweep = 300*time.Millisecond, 150*time.Millisecond, []int{1, 4}
		held, tokens = 20, 5
	}
	var out []Mode
	for _, meter := range []string{"", meterSQLite, meterRedis} {
		suffix := ""
		if meter != "" {
			suffix = "-metered-" + meter
		}
		c1m := Mode{Role: "c1" + suffix, Kind: kindClosed, Conc: 1, Duration: c1, Slices: 3, Meter: meter, Pin: true}
		fm := Mode{Role: "frontier" + suffix, Kind: kindSweep, Sweep: sweep, Duration: step, Slices: 1, Meter: meter, Pin: true}
		if smoke {
			// The smoke run proves the paths, cheaply: one slice, the
			// sweep unmetered only, and Redis unpinned (a race-built
			// gateway on a busy core can outwait Redis's command timeout).
			c1m.Slices = 1
			c1m.Pin = meter != meterRedis
			if meter != "" {
				out = append(out, c1m)
				continue
			}
		}
		out = append(out, c1m, fm)
	}
	return append(out,
		Mode{Role: "rss-4k", Kind: kindClosed, Conc: 64, BodyKB: 4, Duration: c1, Slices: 3, Pin: true},
		// The stream shape: 512 paced streams of 64 tokens at
		// 20 ms (1.3 s each) started over 0.5 s, with the gateway's
		// default limits. Held is the most streams open at once (answer
		// headers read, body not ended): a concurrency gate caps it, as
		// 256 did. A stream queued behind a full gate waits for a whole
		// stream (1.28 s) before its first token: one whose first token
		// came after 1 s is counted stalled (on a loaded machine the bare
		// proxy's streams stall too: read it against the baseline's).
		Mode{Role: "streams-held", Kind: kindStreamConc, Streams: held, Ramp: 500 * time.Millisecond, Tokens: tokens,
			Interval: 20 * time.Millisecond, Slices: 1, DefaultLimits: true, StallAfter: time.Second, Pin: true})
}

// fillBoard names what the board fields change.
func (m *Mode) fillBoard() {
	if m.BodyKB > 0 {
		m.Name += fmt.Sprintf("-%dkb", m.BodyKB)
		m.Title += fmt.Sprintf(", %d KB request bodies", m.BodyKB)
	}
	if m.DefaultLimits {
		m.Name += "-default-limits"
		m.Title += ", the gateway's default limits"
	}
	if m.Pin {
		if _, others, ok := pinCPUs(); ok {
			m.Title += ", proxies pinned to CPU 0 (loadgen, upstream, Redis on " + others + ")"
		} else {
			m.Title += ", not pinned (no taskset or one CPU)"
		}
	}
}

// pinCPUs is the proxies' CPU list and everything else's, when taskset
// is installed and there are at least two CPUs.
func pinCPUs() (proxy, others string, ok bool) {
	n := runtime.NumCPU()
	if n < 2 {
		return "", "", false
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		return "", "", false
	}
	others = "1"
	if n > 2 {
		others = "1-" + strconv.Itoa(n-1)
	}
	return "0", others, true
}

// pinFor pins (or unpins) the long-lived load generator for mode m and
// records whether the processes started next are to be pinned.
func (h *harness) pinFor(m Mode) {
	_, others, ok := pinCPUs()
	want := m.Pin && ok
	if want == h.pin && !want {
		return
	}
	h.pin = want
	if h.loadgen == nil || !ok {
		return
	}
	cpus := others
	if !want {
		cpus = "0-" + strconv.Itoa(runtime.NumCPU()-1)
	}
	if out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(h.loadgen.pid)).CombinedOutput(); err != nil {
		logf("bench: taskset on the load generator: %v: %s", err, strings.TrimSpace(string(out)))
	}
}

// command is exec.Command, under taskset when this mode pins: the proxies
// (gateway, baseline) to CPU 0, the upstream and Redis to the others.
func (h *harness) command(role, bin string, args ...string) *exec.Cmd {
	proxy, others, ok := pinCPUs()
	if !h.pin || !ok || role == "loadgen" {
		return exec.Command(bin, args...)
	}
	cpus := others
	if role == "gateway" || role == "baseline" {
		cpus = proxy
	}
	return exec.Command("taskset", append([]string{"-c", cpus, bin}, args...)...)
}

func newAcc() *acc {
	return &acc{res: JobResult{Latency: newHist(), TTFB: newHist(), TTFT: newHist(), Transit: newHist(), GapAdded: newHist(),
		SchedLate: newHist(), ErrorSamples: map[string]int64{}}}
}

// padBody grows the last message of a bench body to about size bytes
// with plain words, so that the body stays a chat request a metered key
// can price (0 or a size under the body's: unchanged).
func padBody(body []byte, size int) []byte {
	end := bytes.LastIndex(body, []byte(`"}],`))
	if end < 0 || size <= len(body) {
		return body
	}
	const words = " The carrier's reply should name the last scan, any customs hold, and the new arrival estimate."
	pad := bytes.Repeat([]byte(words), (size-len(body))/len(words)+1)[:size-len(body)]
	return slices.Concat(body[:end], pad, body[end:])
}

// add merges one level's accumulation into a target's total.
func (a *acc) add(o *acc) {
	a.perSec = append(a.perSec, o.perSec...)
	a.elapsed += o.elapsed
	a.cpuProxy += o.cpuProxy
	a.cpuUp += o.cpuUp
	a.cpuLG += o.cpuLG
	a.cpuOwn += o.cpuOwn
	a.busy += o.busy
	a.total += o.total
	a.peakProxy = max(a.peakProxy, o.peakProxy)
	a.peakUp = max(a.peakUp, o.peakUp)
	a.peakLG = max(a.peakLG, o.peakLG)
	a.peakAnon = max(a.peakAnon, o.peakAnon)
	x, y := &a.res, &o.res
	x.Sent += y.Sent
	x.OK += y.OK
	x.Errors += y.Errors
	x.NotSent += y.NotSent
	x.Latency.Merge(y.Latency)
	for k, v := range y.ErrorSamples {
		x.ErrorSamples[k] += v
	}
}

// startAccs is a fresh accumulation per target, with each proxy's idle
// RSS read and its peak reset.
func (h *harness) startAccs() map[string]*acc {
	accs := map[string]*acc{}
	for _, t := range h.targets {
		a := newAcc()
		if t.proxy != nil {
			a.rssIdle, _, _ = procStatus(t.proxy.pid)
			resetHWM(t.proxy.pid)
		}
		accs[t.name] = a
	}
	return accs
}

// order is the targets' order for slice (or level) s, recorded in mr:
// rotated by n and reversed every other slice, so that no target always
// runs first, last, or after the same one.
func (h *harness) order(mr *ModeResult, n, s int) []*target {
	order := rotate(h.targets, n)
	if s%2 == 1 {
		slices.Reverse(order)
	}
	names := make([]string, len(order))
	for i, t := range order {
		names[i] = t.name
	}
	mr.Order = append(mr.Order, names)
	return order
}

// runSweep measures every target at each concurrency of m.Sweep, the
// order of the targets rotating per level as runMode's slices do.
func (h *harness) runSweep(mi int, m Mode, mr *ModeResult) error {
	totals := h.startAccs()
	points := map[string][]SweepPoint{}
	level := m
	level.Kind = kindClosed
	for li, c := range m.Sweep {
		level.Conc = c
		for _, t := range h.order(mr, mi+li, li) {
			a := newAcc()
			if err := h.measure(level, t, m.Duration, a, fmt.Sprintf("%s/c%d/%s", m.Name, c, t.name)); err != nil {
				return err
			}
			r := finish(level, t, a)
			points[t.name] = append(points[t.name], SweepPoint{Conc: c, RPS: r.RPSMean, P50: r.Latency.P50, P99: r.Latency.P99,
				OK: r.OK, Errors: r.Errors, NotSent: r.NotSent})
			totals[t.name].add(a)
			time.Sleep(pause(h.o.Smoke))
		}
	}
	for _, t := range h.targets {
		a := totals[t.name]
		tr := finish(level, t, a)
		tr.ProxyRSSIdleKB = a.rssIdle
		tr.Sweep = points[t.name]
		tr.Frontier = frontier(tr.Sweep)
		mr.Targets[t.name] = tr
	}
	return nil
}

// frontier is, per bound, the level with the most requests/s whose p99
// stayed under it with nothing failed or dropped.
func frontier(ps []SweepPoint) []FrontierPoint {
	out := make([]FrontierPoint, len(frontierBounds))
	for i, b := range frontierBounds {
		out[i].P99BoundMs = b
		for _, p := range ps {
			if p.Errors == 0 && p.NotSent == 0 && p.OK > 0 && p.P99 < b && p.RPS > out[i].RPS {
				out[i].RPS, out[i].Conc = p.RPS, p.Conc
			}
		}
	}
	return out
}

// procAnon reads RssAnon (KiB): the private part of a process's RSS,
// without the pages of its executable file, which grow with the binary
// (the gateway's is about three times the bare proxy's).
func procAnon(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if bytes.HasPrefix(line, []byte("RssAnon:")) {
			return kbField(line)
		}
	}
	return 0
}

func frontierAt(t *TargetResult, bound float64) FrontierPoint {
	for _, f := range t.Frontier {
		if f.P99BoundMs == bound {
			return f
		}
	}
	return FrontierPoint{P99BoundMs: bound}
}

// sweepRows are a sweep's levels and its frontier.
func sweepRows(d, b, g *TargetResult) []row {
	var out []row
	for _, bound := range frontierBounds {
		r := row{label: fmt.Sprintf("most rps with p99 < %g ms (at c)", bound)}
		for i, t := range []*TargetResult{d, b, g} {
			f := frontierAt(t, bound)
			r.vals[i] = fmt.Sprintf("%s (c%d)", fnum(f.RPS), f.Conc)
		}
		fb, fg := frontierAt(b, bound).RPS, frontierAt(g, bound).RPS
		r.rd, r.rb = fratio(ratio(fg, frontierAt(d, bound).RPS)), fratio(ratio(fg, fb))
		out = append(out, r)
	}
	for i := range g.Sweep {
		r := row{label: fmt.Sprintf("c=%d: rps / p99 ms", g.Sweep[i].Conc)}
		for j, t := range []*TargetResult{d, b, g} {
			if i < len(t.Sweep) {
				p := t.Sweep[i]
				r.vals[j] = fmt.Sprintf("%s / %s", fnum(p.RPS), fnum(p.P99))
				if p.Errors+p.NotSent > 0 {
					r.vals[j] += fmt.Sprintf(" (%d failed)", p.Errors+p.NotSent)
				}
			}
		}
		if i < len(b.Sweep) {
			r.rb = fratio(ratio(g.Sweep[i].RPS, b.Sweep[i].RPS))
		}
		out = append(out, r)
	}
	return out
}

// boardChecks are issue 28's targets, each against the bare proxy of the
// same run.
func boardChecks(r *Report) []Check {
	var out []Check
	for _, c := range []struct{ role, want string }{
		{"c1", "<= 1.30"}, {"c1-metered-sqlite", "<= 1.60"}, {"c1-metered-redis", "<= 1.60"},
	} {
		if m := r.mode(c.role); m != nil {
			d, g, b := m.Targets["direct"], m.Targets["gateway"], m.Targets["baseline"]
			ga, ba := g.Latency.P99-d.Latency.P99, b.Latency.P99-d.Latency.P99
			out = append(out, Check{Name: "added p99 at c=1 vs baseline's", Mode: m.Name, Want: c.want, Value: addedRatio(ga, ba),
				Detail: fmt.Sprintf("gateway +%.0f µs, baseline +%.0f µs over direct (p50: +%.0f, +%.0f µs)", 1000*ga, 1000*ba,
					1000*(g.Latency.P50-d.Latency.P50), 1000*(b.Latency.P50-d.Latency.P50))})
		}
	}
	for _, role := range []string{"frontier", "frontier-metered-sqlite", "frontier-metered-redis"} {
		m := r.mode(role)
		if m == nil {
			continue
		}
		// The issue judges 5 ms; 50 ms is shown too, since a loaded
		// machine may keep every level's p99 above 5 ms.
		for _, bound := range []float64{5, 50} {
			g, b := frontierAt(m.Targets["gateway"], bound), frontierAt(m.Targets["baseline"], bound)
			v, detail := ratio(g.RPS, b.RPS), fmt.Sprintf("gateway %.0f rps (c%d), baseline %.0f rps (c%d)", g.RPS, g.Conc, b.RPS, b.Conc)
			switch {
			case b.RPS == 0 && g.RPS == 0:
				// Nothing to compare: no level of either stayed under the
				// bound; not a pass.
				v, detail = 0, fmt.Sprintf("no level of either proxy kept p99 under %g ms", bound)
			case b.RPS == 0:
				v, detail = 1, detail+"; only the gateway kept a level under the bound"
			}
			out = append(out, Check{Name: fmt.Sprintf("most rps with p99 < %g ms vs baseline", bound), Mode: m.Name,
				Want: ">= 1.00", Value: v, Detail: detail})
		}
	}
	if m := r.mode("rss-4k"); m != nil {
		g, b := m.Targets["gateway"], m.Targets["baseline"]
		out = append(out, Check{Name: "peak RSS vs baseline", Mode: m.Name, Want: "<= 2.0",
			Value: ratio(float64(g.ProxyRSSPeakKB), float64(b.ProxyRSSPeakKB)),
			Detail: fmt.Sprintf("gateway %.1f MB, baseline %.1f MB; anonymous (RSS without the executable's pages) %.1f and %.1f MB",
				kbMB(g.ProxyRSSPeakKB), kbMB(b.ProxyRSSPeakKB), kbMB(g.ProxyAnonPeakKB), kbMB(b.ProxyAnonPeakKB))})
		out = append(out, Check{Name: "peak anonymous RSS vs baseline (informative)", Mode: m.Name, Want: "<= 2.0",
			Value:  ratio(float64(g.ProxyAnonPeakKB), float64(b.ProxyAnonPeakKB)),
			Detail: fmt.Sprintf("gateway %.1f MB, baseline %.1f MB", kbMB(g.ProxyAnonPeakKB), kbMB(b.ProxyAnonPeakKB))})
	}
	if m := r.mode("streams-held"); m != nil {
		g, b := m.Targets["gateway"], m.Targets["baseline"]
		out = append(out, Check{Name: "concurrent paced streams held vs baseline", Mode: m.Name, Want: ">= 1.00",
			Value: ratio(float64(g.PeakOpen), float64(b.PeakOpen)),
			Detail: fmt.Sprintf("gateway %d open at once of %d (%d ok, %d stalled), baseline %d of %d (%d ok, %d stalled)",
				g.PeakOpen, g.Sent, g.OK, g.Stalled, b.PeakOpen, b.Sent, b.OK, b.Stalled)})
	}
	// JSON has no infinity: a ratio over a missing baseline figure is no
	// pass, and says why.
	for i := range out {
		if math.IsInf(out[i].Value, 0) || math.IsNaN(out[i].Value) {
			out[i].Value, out[i].Detail = 0, out[i].Detail+" (no baseline figure to compare with)"
		}
	}
	return out
}
