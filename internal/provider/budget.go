package provider

import (
	"context"
	"io"
	"sync/atomic"
)

// Budget bounds the bytes of upstream answers held in memory at once,
// gateway-wide (limits.max_buffered_bytes). Each unary answer's reading
// reserves its buffers here before allocating them; without it 24
// concurrent 1 GB answers took RSS past 1.3 GB despite the per-answer cap.
type Budget struct {
	limit atomic.Int64
	used  atomic.Int64
}

// NewBudget returns a budget of limit bytes.
func NewBudget(limit int64) *Budget {
	b := &Budget{}
	b.limit.Store(limit)
	return b
}

// SetLimit changes the limit (a reload); bytes held stay held.
func (b *Budget) SetLimit(n int64) { b.limit.Store(n) }

// Used returns the bytes reserved now.
func (b *Budget) Used() int64 { return b.used.Load() }

func (b *Budget) take(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.limit.Load() {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// Hold returns a new share of b for one attempt (nil for a nil budget).
func (b *Budget) Hold() *Hold {
	if b == nil {
		return nil
	}
	return &Hold{b: b}
}

// Hold is one attempt's reservations, released together when its answer
// has been relayed (or the attempt failed). The nil *Hold reserves
// without limit.
type Hold struct {
	b *Budget
	n atomic.Int64
}

// grow reserves n more bytes; false when the budget has no room.
func (h *Hold) grow(n int64) bool {
	if h == nil {
		return true
	}
	if !h.b.take(n) {
		return false
	}
	h.n.Add(n)
	return true
}

func (h *Hold) shrink(n int64) {
	if h != nil {
		h.n.Add(-n)
		h.b.used.Add(-n)
	}
}

// Release gives back everything held; safe to call more than once.
func (h *Hold) Release() {
	if h != nil {
		h.b.used.Add(-h.n.Swap(0))
	}
}

type holdKey struct{}

// WithHold makes ReadUnary under ctx reserve its buffers in h.
func WithHold(ctx context.Context, h *Hold) context.Context {
	if h == nil {
		return ctx
	}
	return context.WithValue(ctx, holdKey{}, h)
}

func holdOf(ctx context.Context) *Hold {
	h, _ := ctx.Value(holdKey{}).(*Hold)
	return h
}

// errBudget fails an answer that does not fit in the budget.
var errBudget = &Error{Kind: KindBadResponse, Msg: "the gateway's buffer budget (limits.max_buffered_bytes) is exhausted"}

// Growth of a buffered answer: chunks of at most maxStep, each reserved
// before it is allocated, instead of io.ReadAll's doubling (which can
// allocate twice what arrives).
const (
	firstStep = 32 << 10
	maxStep   = 1 << 20
)

// readBounded reads r to its end, at most limit bytes (one more is read to
// tell that the answer is too large: the caller checks len > limit). With
// size ≥ 0 (a declared length) the first chunk is sized for it, up to
// maxPrealloc. Every chunk is reserved in h first.
func readBounded(r io.Reader, size, limit int64, h *Hold) ([]byte, error) {
	next := int64(firstStep)
	if size >= 0 {
		next = min(size, maxPrealloc) + 1 // one byte of room to see EOF
	}
	var chunks [][]byte
	var total, reserved int64
	for total <= limit {
		n := min(next, limit+1-total)
		if !h.grow(n) {
			h.shrink(reserved)
			return nil, errBudget
		}
		reserved += n
		buf := make([]byte, n)
		m, err := io.ReadFull(r, buf)
		chunks = append(chunks, buf[:m])
		total += int64(m)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			h.shrink(reserved)
			return nil, err
		}
		next = min(maxStep, max(firstStep, total/2))
	}
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	if !h.grow(total) {
		h.shrink(reserved)
		return nil, errBudget
	}
	out := make([]byte, 0, total)
	for _, c := range chunks {
		out = append(out, c...)
	}
	h.shrink(reserved) // the chunks are garbage now
	return out, nil
}
