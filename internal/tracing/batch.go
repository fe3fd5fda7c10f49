package tracing

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// batcher is the tracer's span processor: the SDK's batch processor with
// what it lacks here, a count of the spans it drops. OnEnd hands a span
// to a bounded queue without waiting (a full queue drops it, counted);
// one goroutine collects up to size spans or waits at most wait, and
// exports them with a deadline. A collector that is down fills the queue
// and costs dropped spans, never a request's time.
type batcher struct {
	exp     sdktrace.SpanExporter
	ch      chan sdktrace.ReadOnlySpan
	size    int
	wait    time.Duration
	timeout time.Duration
	log     *slog.Logger

	flushC   chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	stopped  atomic.Bool
	// failing: the last export failed (logged once per outage); the
	// export goroutine's own.
	failing bool

	spans *prometheus.CounterVec
}

func newBatcher(exp sdktrace.SpanExporter, queue, size int, wait, timeout time.Duration, log *slog.Logger, reg prometheus.Registerer) *batcher {
	b := &batcher{exp: exp, ch: make(chan sdktrace.ReadOnlySpan, queue), size: size, wait: wait, timeout: timeout, log: log,
		flushC: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
		spans: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_trace_spans_total",
			Help: "Ended spans by outcome: exported (the collector took them), dropped (the export queue, tracing.queue_size, was full), failed (the export failed or timed out)."},
			[]string{"outcome"})}
	for _, o := range []string{"exported", "dropped", "failed"} {
		b.spans.WithLabelValues(o)
	}
	if reg != nil {
		_ = reg.Register(b.spans)
	}
	go b.run()
	return b
}

func (b *batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span; it never waits.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if b.stopped.Load() {
		b.spans.WithLabelValues("dropped").Inc()
		return
	}
	select {
	case b.ch <- s:
	default:
		b.spans.WithLabelValues("dropped").Inc()
	}
}

// ForceFlush exports everything queued before it (or until ctx ends).
func (b *batcher) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case b.flushC <- ack:
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued, within ctx, and stops the exporter.
func (b *batcher) Shutdown(ctx context.Context) error {
	b.stopOnce.Do(func() {
		b.stopped.Store(true)
		close(b.stop)
	})
	select {
	case <-b.done:
	case <-ctx.Done():
	}
	return b.exp.Shutdown(ctx)
}

func (b *batcher) run() {
	defer close(b.done)
	batch := make([]sdktrace.ReadOnlySpan, 0, b.size)
	timer := time.NewTimer(b.wait)
	defer timer.Stop()
	for {
		select {
		case s := <-b.ch:
			batch = append(batch, s)
			if len(batch) >= b.size {
				batch = b.export(batch)
			}
		case <-timer.C:
			batch = b.export(batch)
			timer.Reset(b.wait)
		case ack := <-b.flushC:
			batch = b.drain(batch)
			close(ack)
		case <-b.stop:
			b.drain(batch)
			return
		}
	}
}

// drain exports batch and everything queued now.
func (b *batcher) drain(batch []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	for {
	fill:
		for len(batch) < b.size {
			select {
			case s := <-b.ch:
				batch = append(batch, s)
			default:
				break fill
			}
		}
		if len(batch) == 0 {
			return batch
		}
		batch = b.export(batch)
	}
}

// export sends one batch with its deadline and returns it emptied.
func (b *batcher) export(batch []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	if len(batch) == 0 {
		return batch
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	err := b.exp.ExportSpans(ctx, batch)
	cancel()
	n := float64(len(batch))
	switch {
	case err != nil:
		b.spans.WithLabelValues("failed").Add(n)
		if !b.failing {
			b.log.Warn("tracing: cannot export spans; dropping them until the collector answers (counted in switchboard_trace_spans_total)",
				"spans", len(batch), "error", err.Error())
		}
		b.failing = true
	default:
		b.spans.WithLabelValues("exported").Add(n)
		if b.failing {
			b.log.Info("tracing: exporting spans again")
			b.failing = false
		}
	}
	clear(batch) // the spans may be large; the slice is reused
	return batch[:0]
}
