package redisconn

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A cluster client resends a command after a transport error; noReplay
// (on each node) refuses the second send, since the first may have run.
// A redirect (an error reply) or a dial that never connected is sent
// again; the cluster's own hook forgets the marks once the call returns.
func TestNoReplay(t *testing.T) {
	ctx := context.Background()
	dialErr := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	tests := []struct {
		name   string
		first  error
		resent bool
	}{
		{"lost reply", io.EOF, false},
		{"reset mid-read", &net.OpError{Op: "read", Err: errors.New("connection reset")}, false},
		{"redirect", redis.Error(movedErr("MOVED 3999 127.0.0.1:7001")), true},
		{"dial refused", dialErr, true},
		{"ok", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &noReplay{}
			sends := 0
			node := h.ProcessHook(func(ctx context.Context, cmd redis.Cmder) error { sends++; return tt.first })
			cmd := redis.NewCmd(ctx, "evalsha", "x", 0)
			_ = node(ctx, cmd)
			err := node(ctx, cmd)
			if resent := sends == 2; resent != tt.resent {
				t.Fatalf("sent %d times (second: %v)", sends, err)
			}
			if !tt.resent && !errors.Is(err, ErrMayHaveRun) {
				t.Fatalf("second send: %v", err)
			}
			// Once the call returned, the same Cmd may be used again.
			outer := outerHook{h}.ProcessHook(func(ctx context.Context, cmd redis.Cmder) error { return node(ctx, cmd) })
			fresh := redis.NewCmd(ctx, "evalsha", "x", 0)
			_ = outer(ctx, fresh)
			if _, marked := h.sent.Load(fresh); marked {
				t.Fatal("a mark outlived its call")
			}
		})
	}
	t.Run("pipeline", func(t *testing.T) {
		h := &noReplay{}
		var sent [][]redis.Cmder
		pipe := h.ProcessPipelineHook(func(ctx context.Context, cmds []redis.Cmder) error {
			sent = append(sent, cmds)
			return io.ErrUnexpectedEOF
		})
		a, b := redis.NewCmd(ctx, "evalsha", "a", 0), redis.NewCmd(ctx, "evalsha", "b", 0)
		_ = pipe(ctx, []redis.Cmder{a, b})
		// go-redis resends the whole broken pipeline, replies read or not.
		if err := pipe(ctx, []redis.Cmder{a, b}); !errors.Is(err, ErrMayHaveRun) || len(sent) != 1 ||
			!errors.Is(a.Err(), ErrMayHaveRun) || !errors.Is(b.Err(), ErrMayHaveRun) {
			t.Fatalf("resent: %d sends, %v, %v %v", len(sent), err, a.Err(), b.Err())
		}
	})
}

type movedErr string

func (e movedErr) Error() string { return string(e) }
func (movedErr) RedisError()     {}
