package usagelog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// In a fleet every replica writes its own rows to its own file, as alone,
// and also publishes them to one Redis stream; every replica drains the
// stream into its file, skipping its own rows. So any replica answers
// queries for the whole fleet (a few hundred ms behind), and a replica
// whose Redis is down still keeps its own rows.
//
// Exactly once: a replica's position in the stream is committed in the
// same transaction as the rows it drained, so a crash neither skips nor
// doubles rows; its origin id is kept in its file, so its own rows are
// recognised after a restart too. The stream is capped (MAXLEN ~
// StreamMax): a replica away longer than the stream holds misses the
// others' rows of that gap (its own are in its file).

// StreamKey is the fleet's usage stream.
const StreamKey = "switchboard:usage:v1"

// Defaults of the fleet stream.
const (
	// DefaultStreamMax bounds the stream (about 400 bytes a row).
	DefaultStreamMax = 200_000
	drainCount       = 512
	// drainBlock bounds a read's wait for new rows: a blocked read is not
	// interrupted by Close, so it is short (5 idle reads a second).
	drainBlock = 200 * time.Millisecond
	// retryWait paces the drain while Redis fails.
	retryWait = time.Second
)

// Meta keys of a fleet replica's file.
const (
	metaOrigin = "fleet_origin"
	metaPos    = "fleet_position"
)

// Fleet publishes this replica's rows and drains everyone else's.
type Fleet struct {
	c       redis.UniversalClient
	db      *DB
	log     *slog.Logger
	origin  string
	max     int64
	timeout time.Duration

	// ctx ends with Close, so that a blocked read returns at once.
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once
}

// FleetOptions configure a Fleet.
type FleetOptions struct {
	// StreamMax caps the stream (default DefaultStreamMax).
	StreamMax int64
	// CommandTimeout bounds each Redis command (default 2 s).
	CommandTimeout time.Duration
	Log            *slog.Logger
}

// NewFleet joins db to the fleet's stream on c and starts draining it;
// Close stops the drain.
func NewFleet(ctx context.Context, c redis.UniversalClient, db *DB, o FleetOptions) (*Fleet, error) {
	if o.StreamMax <= 0 {
		o.StreamMax = DefaultStreamMax
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = 2 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	origin, err := db.meta(ctx, metaOrigin)
	if err != nil {
		return nil, fmt.Errorf("usage log: %w", err)
	}
	if origin == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		origin = hex.EncodeToString(b[:])
		if err := db.insert(ctx, nil, map[string]string{metaOrigin: origin}); err != nil {
			return nil, fmt.Errorf("usage log: %w", err)
		}
	}
	f := &Fleet{c: c, db: db, log: o.Log, origin: origin, max: o.StreamMax, timeout: o.CommandTimeout, done: make(chan struct{})}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	go f.run()
	return f, nil
}

// Origin is this replica's id in the stream.
func (f *Fleet) Origin() string { return f.origin }

// write publishes a batch in one round trip.
func (f *Fleet) write(ctx context.Context, rows []Row) error {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	pipe := f.c.Pipeline()
	for i := range rows {
		b, err := json.Marshal(rows[i])
		if err != nil {
			return err
		}
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: StreamKey, MaxLen: f.max, Approx: true,
			Values: []any{"o", f.origin, "r", b}})
	}
	_, err := pipe.Exec(ctx)
	return err
}

// run drains the stream into the file until Close.
func (f *Fleet) run() {
	defer close(f.done)
	pos := ""
	failing := false
	for f.ctx.Err() == nil {
		if pos == "" {
			p, err := f.db.meta(context.Background(), metaPos)
			if err != nil {
				f.wait(&failing, err)
				continue
			}
			pos = p
			if pos == "" {
				pos = "0" // a new replica takes what the stream still holds
			}
		}
		next, err := f.drain(pos)
		if err != nil {
			f.wait(&failing, err)
			continue
		}
		if failing {
			f.log.Info("usage log: draining the fleet stream again")
			failing = false
		}
		pos = next
	}
}

// drain reads one batch after pos, writes the others' rows and the new
// position in one transaction, and returns the position.
func (f *Fleet) drain(pos string) (string, error) {
	ctx, cancel := context.WithTimeout(f.ctx, drainBlock+f.timeout)
	defer cancel()
	res, err := f.c.XRead(ctx, &redis.XReadArgs{Streams: []string{StreamKey, pos}, Count: drainCount, Block: drainBlock}).Result()
	if errors.Is(err, redis.Nil) {
		return pos, nil
	}
	if err != nil {
		if f.ctx.Err() != nil {
			return pos, nil // closing
		}
		return pos, err
	}
	var rows []Row
	last := pos
	for _, s := range res {
		for _, m := range s.Messages {
			last = m.ID
			if o, _ := m.Values["o"].(string); o == f.origin {
				continue
			}
			raw, _ := m.Values["r"].(string)
			var r Row
			if err := json.Unmarshal([]byte(raw), &r); err != nil || r.Time.IsZero() {
				continue // not a row this version writes: skipped, not fatal
			}
			r.ID = 0
			rows = append(rows, r)
		}
	}
	if last == pos {
		return pos, nil
	}
	wctx, wcancel := context.WithTimeout(context.Background(), writeTimeout)
	defer wcancel()
	if err := f.db.insert(wctx, rows, map[string]string{metaPos: last}); err != nil {
		return pos, err
	}
	return last, nil
}

// wait logs the first failure of a run of them and pauses.
func (f *Fleet) wait(failing *bool, err error) {
	if !*failing {
		f.log.Warn("usage log: cannot drain the fleet stream; retrying", "error", err.Error())
		*failing = true
	}
	t := time.NewTimer(retryWait)
	defer t.Stop()
	select {
	case <-f.ctx.Done():
	case <-t.C:
	}
}

// Close stops the drain.
func (f *Fleet) Close() {
	f.stopOnce.Do(f.cancel)
	<-f.done
}
