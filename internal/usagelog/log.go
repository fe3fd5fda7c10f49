package usagelog

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"switchboard/internal/clock"
)

// Defaults and bounds of usage_log.* (the config validates the same).
const (
	DefaultRetention = 30 * 24 * time.Hour
	DefaultBuffer    = 10_000
	// maxBatch bounds the rows of one write transaction; batchWait is the
	// longest a row waits for others to share its commit.
	maxBatch  = 512
	batchWait = 100 * time.Millisecond
	// pruneEvery is how often rows past their retention are deleted, in
	// batches of pruneBatch.
	pruneEvery = time.Minute
	pruneBatch = 1000
	// writeTimeout bounds one batch's write.
	writeTimeout = 10 * time.Second
)

// Options configure a Log.
type Options struct {
	// Clock times pruning and row ages (default: the wall clock).
	Clock clock.Clock
	// Retention keeps rows this long (default DefaultRetention).
	Retention time.Duration
	// Buffer bounds the rows queued for the writer (default
	// DefaultBuffer); when it is full new rows are dropped and counted,
	// never waited for.
	Buffer int
	// Log receives write failures (default slog.Default()).
	Log *slog.Logger
	// Registerer takes the log's collectors (nil: not registered).
	Registerer prometheus.Registerer
	// Fleet, when set, also publishes every written batch to the fleet's
	// stream (see Fleet).
	Fleet *Fleet
}

// Log records rows off the request path: Record queues (never blocks),
// one writer goroutine collects rows for up to 100 ms (or 512 of them)
// and writes them in one transaction, so that a commit's cost is shared
// by every row that arrived meanwhile.
//
// The queue is a slice under a mutex rather than a channel: a buffered
// channel of DefaultBuffer rows is a 2.4 MB ring whose every slot becomes
// resident as sends go round it (and is scanned by every GC), and each
// send to a waiting writer is a goroutine wake-up on the request's path.
// Here the queue holds only what is pending, and Record wakes the writer
// only for the first row of a batch (or a full batch).
type Log struct {
	db  *DB
	clk clock.Clock
	log *slog.Logger
	// fleet, when set, also publishes each batch to the fleet's stream.
	fleet *Fleet
	// unpublished: the last publish failed (logged once per outage);
	// the writer's own.
	unpublished bool

	mu      sync.Mutex
	pending []Row // queued rows, at most buffer
	spare   []Row // the writer's last batch, reused as the next queue
	buffer  int
	// wake (capacity 1) tells the writer rows are pending: sent by the
	// first row of a batch and by the row that fills one.
	wake      chan struct{}
	flushC    chan chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closed    atomic.Bool
	closeOnce sync.Once
	retention atomic.Int64 // nanoseconds

	rows *prometheus.CounterVec
}

// NewLog starts the writer of db.
func NewLog(db *DB, o Options) *Log {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Buffer <= 0 {
		o.Buffer = DefaultBuffer
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	l := &Log{db: db, clk: o.Clock, log: o.Log, fleet: o.Fleet, buffer: o.Buffer, wake: make(chan struct{}, 1),
		flushC: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_usage_log_rows_total",
			Help: "Usage-log rows by outcome: written (committed to this replica's file), dropped (the queue was full), failed (the write failed), unpublished (a fleet replica could not publish them to the others)."},
			[]string{"outcome"})}
	for _, o := range []string{"written", "dropped", "failed", "unpublished"} {
		l.rows.WithLabelValues(o)
	}
	if o.Registerer != nil {
		_ = o.Registerer.Register(l.rows)
	}
	l.retention.Store(int64(o.Retention))
	go l.run()
	return l
}

// DB is the file the log writes (and queries read).
func (l *Log) DB() *DB { return l.db }

// SetRetention changes the retention (config reload).
func (l *Log) SetRetention(d time.Duration) {
	if d > 0 {
		l.retention.Store(int64(d))
	}
}

// Record queues r for writing; it never waits. It reports false when the
// row was dropped (the queue is full, or the log closed).
func (l *Log) Record(r Row) bool {
	if l == nil {
		return false
	}
	if l.closed.Load() {
		l.rows.WithLabelValues("dropped").Inc()
		return false
	}
	l.mu.Lock()
	n := len(l.pending)
	if n >= l.buffer {
		l.mu.Unlock()
		l.rows.WithLabelValues("dropped").Inc()
		return false
	}
	if l.pending == nil {
		l.pending = make([]Row, 0, min(maxBatch, l.buffer))
	}
	l.pending = append(l.pending, r)
	l.mu.Unlock()
	if n == 0 || n+1 == maxBatch {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// take returns up to maxBatch queued rows, handing the writer's previous
// batch back as the queue's storage; a queue grown past a few batches by
// a backlog is let go once drained, so that its memory does not outlive
// the burst.
func (l *Log) take() []Row {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) <= maxBatch {
		batch := l.pending
		l.pending = l.spare[:0]
		if cap(batch) > 4*maxBatch {
			batch = slices.Clone(batch)
		}
		l.spare = nil
		return batch
	}
	batch := slices.Clone(l.pending[:maxBatch])
	rest := copy(l.pending, l.pending[maxBatch:])
	clear(l.pending[rest:])
	l.pending = l.pending[:rest]
	return batch
}

// queued is how many rows wait for the writer.
func (l *Log) queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// reuse returns a written batch's storage for reuse (its rows cleared, so
// that it holds no strings past their write).
func (l *Log) reuse(batch []Row) {
	if cap(batch) == 0 || cap(batch) > 4*maxBatch {
		return
	}
	clear(batch)
	l.mu.Lock()
	if l.spare == nil {
		l.spare = batch[:0]
	}
	l.mu.Unlock()
}

// Flush returns once every row recorded before it was written (or ctx
// ended).
func (l *Log) Flush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case l.flushC <- ack:
	case <-l.done:
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

// Close writes what is queued and stops the writer (the DB stays open).
func (l *Log) Close() {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		close(l.stop)
	})
	<-l.done
}

func (l *Log) run() {
	defer close(l.done)
	prune, cancel := l.clk.After(pruneEvery)
	defer func() { cancel() }()
	for {
		select {
		case <-l.wake:
			ack, stop := l.collect()
			l.drainAll()
			if ack != nil {
				close(ack)
			}
			if stop {
				return
			}
		case ack := <-l.flushC:
			l.drainAll()
			close(ack)
		case <-prune:
			l.prune()
			prune, cancel = l.clk.After(pruneEvery)
		case <-l.stop:
			l.drainAll()
			return
		}
	}
}

// collect lets rows gather for up to batchWait, or until a batch is full,
// a Flush asks (ack) or Close does (stop). Rows wait a little so that a
// commit (tens of µs) is shared by many of them: nobody waits for a row.
func (l *Log) collect() (chan struct{}, bool) {
	if l.queued() >= maxBatch {
		return nil, false
	}
	timer, cancel := l.clk.After(batchWait)
	defer cancel()
	for {
		select {
		case <-timer:
			return nil, false
		case <-l.wake:
			if l.queued() >= maxBatch {
				return nil, false
			}
		case ack := <-l.flushC:
			return ack, false
		case <-l.stop:
			return nil, true
		}
	}
}

// drainAll writes everything queued now, a batch at a time.
func (l *Log) drainAll() {
	for {
		batch := l.take()
		if len(batch) == 0 {
			l.reuse(batch)
			return
		}
		l.write(batch)
		l.reuse(batch)
	}
}

func (l *Log) write(batch []Row) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	if err := l.db.Insert(ctx, batch...); err != nil {
		l.rows.WithLabelValues("failed").Add(float64(len(batch)))
		l.log.Warn("usage log: cannot write a batch", "rows", len(batch), "path", l.db.path, "error", err.Error())
	} else {
		l.rows.WithLabelValues("written").Add(float64(len(batch)))
	}
	if l.fleet == nil {
		return
	}
	if err := l.fleet.write(ctx, batch); err != nil {
		l.rows.WithLabelValues("unpublished").Add(float64(len(batch)))
		if !l.unpublished {
			l.log.Warn("usage log: cannot publish rows to the fleet; the other replicas will not see them (counted in switchboard_usage_log_rows_total{outcome=\"unpublished\"})",
				"rows", len(batch), "error", err.Error())
		}
		l.unpublished = true
		return
	}
	if l.unpublished {
		l.log.Info("usage log: publishing rows to the fleet again")
		l.unpublished = false
	}
}

// prune deletes rows past the retention, a batch at a time, letting
// queued rows go first between batches.
func (l *Log) prune() {
	before := l.clk.Now().Add(-time.Duration(l.retention.Load()))
	for {
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		n, err := l.db.Prune(ctx, before, pruneBatch)
		cancel()
		if err != nil {
			l.log.Warn("usage log: cannot prune", "path", l.db.path, "error", err.Error())
			return
		}
		if n < pruneBatch {
			return
		}
		if l.queued() > 0 {
			batch := l.take()
			l.write(batch)
			l.reuse(batch)
		}
	}
}

// PruneBefore deletes every row older than before, a batch at a time;
// it returns how many it deleted.
func (d *DB) PruneBefore(ctx context.Context, before time.Time) (int, error) {
	total := 0
	for {
		n, err := d.Prune(ctx, before, pruneBatch)
		total += n
		if err != nil || n < pruneBatch {
			return total, err
		}
	}
}
