package inference

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"switchboard/internal/proxy"
)

// How a relayed stream ended (the outcome label of switchboard_streams_total).
const (
	streamCompleted = "completed"
	streamErrored   = "failed"
	streamTimeout   = "timeout"
	streamAbandoned = "abandoned"
	streamCut       = "cut"
)

// streamLimit ends a stream that outlives timeouts.stream by closing its
// upstream; the relay then sees an error and reports the timeout.
type streamLimit struct {
	fired atomic.Bool
	stop  func() bool
	d     time.Duration
}

// limitStream arms timeouts.stream for res, measured from its send; nil
// when the limit is off.
func (s *Plane) limitStream(res *proxy.Result) *streamLimit {
	snap := s.Snap()
	if snap == nil || snap.Config.Timeouts.Stream <= 0 {
		return nil
	}
	d := snap.Config.Timeouts.Stream.D()
	l := &streamLimit{d: d}
	left := max(d-s.Clock.Now().Sub(res.Sent), 0)
	l.stop = s.Clock.AfterFunc(left, func() {
		l.fired.Store(true)
		res.Close() // the pump's next read fails
	})
	return l
}

// end stops the timer; it reports whether the limit ended the stream.
func (l *streamLimit) end() bool {
	if l == nil {
		return false
	}
	l.stop()
	return l.fired.Load()
}

func (l *streamLimit) message() string {
	return fmt.Sprintf("the stream exceeded timeouts.stream (%s) and was ended", l.d)
}

// streamOutcome classifies a relayed stream's end from the relay's error.
func (s *Plane) streamOutcome(ctx context.Context, err error, timedOut bool) string {
	gone := errors.Is(err, errClientGone) || ctx.Err() != nil
	switch {
	case timedOut:
		return streamTimeout
	case gone && s.Cutting():
		return streamCut
	case gone:
		return streamAbandoned
	case err != nil:
		return streamErrored
	}
	return streamCompleted
}

// errClientGone: the client left while its stream was relayed.
var errClientGone = errors.New("client went away")
