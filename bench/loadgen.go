package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The load generator runs in its own process, driven by the harness with
// one JSON job per line on stdin and answering one JSON result per line on
// stdout, so that its CPU and memory are measured apart from the proxies'.

// Job kinds.
const (
	kindClosed     = "closed"            // Concurrency workers, back to back, for Duration
	kindOpen       = "open"              // Rate requests/s for Duration, latency from the scheduled time
	kindStreamOpen = "stream-open"       // Rate streams/s for Duration
	kindStreamConc = "stream-concurrent" // Streams at once, started over Ramp
)

// Job is one measured run against one target.
type Job struct {
	ID          string        `json:"id"`
	Kind        string        `json:"kind"`
	URL         string        `json:"url"`
	Token       string        `json:"token"`
	Concurrency int           `json:"concurrency,omitempty"`
	Rate        float64       `json:"rate,omitempty"`
	Duration    time.Duration `json:"duration"`
	Streams     int           `json:"streams,omitempty"`
	Ramp        time.Duration `json:"ramp,omitempty"`
	Tokens      int           `json:"tokens,omitempty"`
	Interval    time.Duration `json:"interval,omitempty"`
	// Timeout bounds one request (a whole stream included) past its
	// expected length; what is still running then is an error.
	Timeout     time.Duration `json:"timeout"`
	MaxInFlight int           `json:"max_in_flight,omitempty"`
	// BodyBytes pads each request's last message to about this size (0:
	// the ~1 KB body as it is).
	BodyBytes int `json:"body_bytes,omitempty"`
	// StallAfter counts a stream as stalled when its first token came
	// later than this after it was sent (0: not counted).
	StallAfter time.Duration `json:"stall_after,omitempty"`
}

// JobResult is what the load generator saw.
type JobResult struct {
	ID      string        `json:"id"`
	Err     string        `json:"error,omitempty"`
	Elapsed time.Duration `json:"elapsed"`
	// Sent requests (or streams) were handed to the HTTP client; NotSent
	// were scheduled but dropped because MaxInFlight were already running.
	Sent    int64 `json:"sent"`
	OK      int64 `json:"ok"`
	Errors  int64 `json:"errors"`
	NotSent int64 `json:"not_sent"`
	// Cut streams ended without [DONE], with an error event, or with fewer
	// token chunks than asked.
	Cut          int64            `json:"cut"`
	Stalled      int64            `json:"stalled,omitempty"`
	ErrorSamples map[string]int64 `json:"error_samples,omitempty"`
	// PerSecond counts completions in each whole second of Duration.
	PerSecond []int64 `json:"per_second,omitempty"`
	Latency   *Hist   `json:"latency"`
	TTFB      *Hist   `json:"ttfb"`
	// TTFT is the time to the first token chunk: a bare proxy relays the
	// role chunk before it, the gateway holds that chunk until the token.
	TTFT     *Hist `json:"ttft"`
	Transit  *Hist `json:"transit"`
	GapAdded *Hist `json:"gap_added"`
	// SchedLate is how late the open-loop scheduler dispatched (its own
	// lag: large values mean the generator could not keep up).
	SchedLate *Hist `json:"sched_late"`
	Chunks    int64 `json:"chunks"`
	PeakOpen  int64 `json:"peak_open"`
}

// stats is one worker's or one stream's share, merged under a lock.
type stats struct {
	ok, errs, cut, chunks, stalled     int64
	lat, ttfb, ttft, transit, gap, lag *Hist
	perSec                             []int64
	errSamples                         map[string]int64
}

func newStats() *stats {
	return &stats{lat: newHist(), ttfb: newHist(), ttft: newHist(), transit: newHist(), gap: newHist(), lag: newHist(),
		errSamples: map[string]int64{}}
}

func (s *stats) second(i int) {
	if i < 0 {
		return
	}
	for len(s.perSec) <= i {
		s.perSec = append(s.perSec, 0)
	}
	s.perSec[i]++
}

func (s *stats) fail(err error) {
	s.errs++
	msg := err.Error()
	if len(msg) > 120 {
		msg = msg[:120]
	}
	if len(s.errSamples) < 8 || s.errSamples[msg] > 0 {
		s.errSamples[msg]++
	}
}

func (s *stats) merge(o *stats) {
	s.ok += o.ok
	s.errs += o.errs
	s.cut += o.cut
	s.stalled += o.stalled
	s.chunks += o.chunks
	s.lat.Merge(o.lat)
	s.ttfb.Merge(o.ttfb)
	s.ttft.Merge(o.ttft)
	s.transit.Merge(o.transit)
	s.gap.Merge(o.gap)
	s.lag.Merge(o.lag)
	for i, n := range o.perSec {
		for len(s.perSec) <= i {
			s.perSec = append(s.perSec, 0)
		}
		s.perSec[i] += n
	}
	for k, v := range o.errSamples {
		if len(s.errSamples) < 8 || s.errSamples[k] > 0 {
			s.errSamples[k] += v
		}
	}
}

type sink struct {
	mu sync.Mutex
	s  *stats
}

func (k *sink) merge(o *stats) {
	k.mu.Lock()
	k.s.merge(o)
	k.mu.Unlock()
}

// gen runs one job.
type gen struct {
	job    Job
	client *http.Client
	tr     *http.Transport
	body   []byte
	auth   []string
	start  time.Time
	sink   sink
	open   atomic.Int64
	peak   atomic.Int64
}

var ctJSON = []string{"application/json"}

// requestBody is a realistic chat request of about 1 KB; the upstream
// reads max_tokens and, for a stream, bench_interval_us from it.
func requestBody(stream bool, tokens int, interval time.Duration) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"` + benchModel + `","messages":[`)
	b.WriteString(`{"role":"system","content":"You are a careful assistant for a logistics company. Answer in plain English, ` +
		`cite the shipment id when you mention one, never invent tracking numbers, and keep answers under one hundred words unless asked for more detail."},`)
	b.WriteString(`{"role":"user","content":"Shipment SHP-20931 left Rotterdam on Monday and was due in Hamburg on Wednesday. ` +
		`The tracking page has shown 'in transit' since Tuesday evening. What are the usual causes of such a delay on this route, ` +
		`and what should I ask the carrier when I call them?"},`)
	b.WriteString(`{"role":"assistant","content":"Common causes are port congestion, customs holds, and missed rail connections. ` +
		`Ask the carrier for the last scan location, whether a customs hold is recorded, and the new estimated arrival."},`)
	b.WriteString(`{"role":"user","content":"Thanks. Draft a short, polite message to the carrier asking exactly that."}],`)
	b.WriteString(`"temperature":0.2,"top_p":1,"user":"bench-user-0001",`)
	fmt.Fprintf(&b, `"max_tokens":%d,`, max(tokens, 1))
	// Only streams need the pacing field; a unary body stays free of
	// unknown controls, so that a budgeted (metered) key can price it.
	if stream {
		fmt.Fprintf(&b, `"bench_interval_us":%d,`, interval.Microseconds())
	}
	if stream {
		b.WriteString(`"stream":true,"stream_options":{"include_usage":true}}`)
	} else {
		b.WriteString(`"stream":false}`)
	}
	return b.Bytes()
}

func newGen(j Job) *gen {
	conns := max(j.Concurrency, j.Streams, j.MaxInFlight, 64)
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	stream := j.Kind == kindStreamOpen || j.Kind == kindStreamConc
	return &gen{job: j, tr: tr, client: &http.Client{Transport: tr},
		body: padBody(requestBody(stream, j.Tokens, j.Interval), j.BodyBytes), auth: []string{"Bearer " + j.Token},
		sink: sink{s: newStats()}}
}

func (g *gen) request(ctx context.Context) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.job.URL, bytes.NewReader(g.body))
	if err != nil {
		return nil, err
	}
	req.Header = http.Header{"Content-Type": ctJSON, "Authorization": g.auth}
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		resp.Body.Close()
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return resp, nil
}

// unary sends one request and reads the whole answer.
func (g *gen) unary(ctx context.Context) error {
	resp, err := g.request(ctx)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("empty answer")
	}
	return nil
}

var (
	dataPrefix = []byte("data: ")
	donePrefix = []byte("[DONE]")
	tsKeyB     = []byte(tsKey)
)

// stream runs one stream from its scheduled time at, recording TTFB (first
// body event), each token chunk's transit time (arrival minus the
// upstream's stamp) and the delay added between chunks.
func (g *gen) stream(ctx context.Context, at time.Time, st *stats) {
	resp, err := g.request(ctx)
	if err != nil {
		st.fail(err)
		return
	}
	defer resp.Body.Close()
	n := g.open.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			break
		}
	}
	defer g.open.Add(-1)
	br := bufio.NewReaderSize(resp.Body, 4096)
	var prevRecv, prevSent int64
	count, first, done, errEvent := 0, true, false, false
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if err != io.EOF {
				st.fail(fmt.Errorf("read: %w", err))
				st.cut++
				return
			}
			break
		}
		if !bytes.HasPrefix(line, dataPrefix) {
			continue
		}
		now := time.Now()
		if first {
			st.ttfb.Add(int64(now.Sub(at)))
			first = false
		}
		payload := line[len(dataPrefix):]
		if bytes.HasPrefix(payload, donePrefix) {
			done = true
			continue
		}
		i := bytes.Index(payload, tsKeyB)
		if i < 0 || i+len(tsKeyB)+tsWidth > len(payload) {
			if bytes.Contains(payload, []byte(`"error"`)) {
				errEvent = true
			}
			continue
		}
		sent, perr := strconv.ParseInt(string(payload[i+len(tsKeyB):i+len(tsKeyB)+tsWidth]), 10, 64)
		if perr != nil {
			continue
		}
		recv := now.UnixNano()
		if count == 0 {
			st.ttft.Add(int64(now.Sub(at)))
			if g.job.StallAfter > 0 && now.Sub(at) > g.job.StallAfter {
				st.stalled++
			}
		}
		st.transit.Add(recv - sent)
		if count > 0 {
			st.gap.Add((recv - prevRecv) - (sent - prevSent))
		}
		prevRecv, prevSent = recv, sent
		count++
	}
	st.chunks += int64(count)
	end := time.Now()
	st.lat.Add(int64(end.Sub(at)))
	if !done || errEvent || count != max(g.job.Tokens, 1) {
		st.cut++
		st.fail(fmt.Errorf("cut stream: done=%v error_event=%v chunks=%d/%d", done, errEvent, count, g.job.Tokens))
		return
	}
	st.ok++
	st.second(int(end.Sub(g.start) / time.Second))
}

func (g *gen) run() JobResult {
	j := g.job
	expected := time.Duration(max(j.Tokens-1, 0)) * j.Interval
	ctx, cancel := context.WithTimeout(context.Background(), j.Duration+j.Ramp+expected+j.Timeout)
	defer cancel()
	defer g.tr.CloseIdleConnections()
	res := JobResult{ID: j.ID}
	g.start = time.Now()
	var sent, notSent atomic.Int64
	switch j.Kind {
	case kindClosed:
		deadline := g.start.Add(j.Duration)
		var wg sync.WaitGroup
		for range j.Concurrency {
			wg.Go(func() {
				st := newStats()
				for {
					t0 := time.Now()
					if !t0.Before(deadline) {
						break
					}
					sent.Add(1)
					err := g.unary(ctx)
					t1 := time.Now()
					if err != nil {
						st.fail(err)
						if ctx.Err() != nil {
							break
						}
						continue
					}
					st.ok++
					st.lat.Add(int64(t1.Sub(t0)))
					st.second(int(t1.Sub(g.start) / time.Second))
				}
				g.sink.merge(st)
			})
		}
		wg.Wait()
	case kindOpen, kindStreamOpen:
		n := int(j.Rate * j.Duration.Seconds())
		limit := j.MaxInFlight
		if limit <= 0 {
			limit = 4096
		}
		sem := make(chan struct{}, limit)
		var wg sync.WaitGroup
		lag := newHist()
		for i := range n {
			at := g.start.Add(time.Duration(float64(i) * float64(time.Second) / j.Rate))
			if d := time.Until(at); d > 0 {
				time.Sleep(d)
			}
			lag.Add(int64(time.Since(at)))
			select {
			case sem <- struct{}{}:
			default:
				notSent.Add(1)
				continue
			}
			sent.Add(1)
			wg.Go(func() {
				defer func() { <-sem }()
				st := newStats()
				if j.Kind == kindStreamOpen {
					g.stream(ctx, at, st)
				} else if err := g.unary(ctx); err != nil {
					st.fail(err)
				} else {
					end := time.Now()
					st.ok++
					st.lat.Add(int64(end.Sub(at)))
					st.second(int(end.Sub(g.start) / time.Second))
				}
				g.sink.merge(st)
			})
		}
		wg.Wait()
		g.sink.s.lag.Merge(lag)
	case kindStreamConc:
		var wg sync.WaitGroup
		for i := range j.Streams {
			at := g.start
			if j.Streams > 1 {
				at = g.start.Add(j.Ramp * time.Duration(i) / time.Duration(j.Streams))
			}
			if d := time.Until(at); d > 0 {
				time.Sleep(d)
			}
			sent.Add(1)
			wg.Go(func() {
				st := newStats()
				g.stream(ctx, at, st)
				g.sink.merge(st)
			})
		}
		wg.Wait()
	default:
		res.Err = "unknown job kind " + j.Kind
		return res
	}
	res.Elapsed = time.Since(g.start)
	s := g.sink.s
	res.Sent, res.NotSent = sent.Load(), notSent.Load()
	res.OK, res.Errors, res.Cut, res.Chunks, res.Stalled = s.ok, s.errs, s.cut, s.chunks, s.stalled
	res.ErrorSamples = s.errSamples
	res.Latency, res.TTFB, res.TTFT, res.Transit, res.GapAdded, res.SchedLate = s.lat, s.ttfb, s.ttft, s.transit, s.gap, s.lag
	res.PeakOpen = g.peak.Load()
	// Keep whole seconds inside the measured duration only.
	whole := int(j.Duration / time.Second)
	if j.Kind == kindStreamConc {
		whole = len(s.perSec)
	}
	if len(s.perSec) > whole {
		s.perSec = s.perSec[:whole]
	}
	res.PerSecond = s.perSec
	return res
}

func loadgenMain(args []string) int {
	soft, hard, _ := raiseNofile(1 << 20)
	announce(hello{Nofile: soft, NofileHard: hard})
	dec := json.NewDecoder(bufio.NewReader(os.Stdin))
	enc := json.NewEncoder(os.Stdout)
	for {
		var j Job
		if err := dec.Decode(&j); err != nil {
			if err == io.EOF {
				return 0
			}
			logf("loadgen: bad job: %v", err)
			return 1
		}
		res := newGen(j).run()
		if err := enc.Encode(res); err != nil {
			logf("loadgen: %v", err)
			return 1
		}
	}
}

// median of per-second counts, ignoring nothing: callers pass whole seconds.
func median(xs []int64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]int64(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return float64(s[len(s)/2])
	}
	return float64(s[len(s)/2-1]+s[len(s)/2]) / 2
}
