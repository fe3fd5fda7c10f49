package spend

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// NanoPerUSD is one US dollar in nano-USD.
const NanoPerUSD = 1_000_000_000

// MaxAmount bounds every amount, so that sums of a few never overflow.
const MaxAmount int64 = 1 << 60

// Usage is what a terminal response reported, in OpenAI's convention:
// Input includes CacheRead and CacheWrite (as prompt_tokens includes cached
// tokens); Output includes Reasoning (as completion_tokens does).
type Usage struct {
	Input, Output, CacheRead, CacheWrite, Reasoning int64
	// CostNanoUSD is a bill the provider reported itself; it outranks the
	// catalog.
	CostNanoUSD *int64
}

// Tokens is the usage's token total (input + output).
func (u Usage) Tokens() int64 { return max(u.Input, 0) + max(u.Output, 0) }

// tokenCost is ceil(tokens × nanoPerMillion / 1e6), saturating at
// MaxAmount. Negative inputs count as zero.
func tokenCost(tokens, nanoPerMillion int64) int64 {
	if tokens <= 0 || nanoPerMillion <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(tokens), uint64(nanoPerMillion))
	const d = 1_000_000
	if hi >= d {
		return MaxAmount
	}
	q, r := bits.Div64(hi, lo, d)
	if r > 0 {
		q++
	}
	if q > uint64(MaxAmount) {
		return MaxAmount
	}
	return int64(q)
}

// addSat adds amounts, saturating at MaxAmount.
func addSat(xs ...int64) int64 {
	var s int64
	for _, x := range xs {
		if x > MaxAmount-s {
			return MaxAmount
		}
		s += x
	}
	return s
}

// known returns r, or the highest known rate when r is unknown: a token
// class without a price is charged at the model's highest rate.
func known(r int64, all Rates) int64 {
	if r == Unknown {
		return all.Highest()
	}
	return r
}

// Cost prices a usage with the entry's rates at the prompt's tier. media
// charges uncached input at the media rate when the model has one (the
// request carried audio or other media). ok is false when the entry has no
// input or output price.
func (e *Entry) Cost(u Usage, media bool) (nano int64, ok bool) {
	if e == nil || !e.Priced() {
		return 0, false
	}
	r := e.RatesAt(u.Input)
	in := r.Input
	if media && r.InputMedia != Unknown {
		in = max(in, r.InputMedia)
	}
	cr, cw := max(u.CacheRead, 0), max(u.CacheWrite, 0)
	plain := max(u.Input-cr-cw, 0)
	return addSat(
		tokenCost(plain, in),
		tokenCost(cr, known(r.CacheRead, r)),
		tokenCost(cw, known(r.CacheWrite, r)),
		tokenCost(max(u.Output, 0), r.Output),
	), true
}

// FormatUSD writes nano-USD as an exact decimal ("1.5", "0.000000001").
func FormatUSD(nano int64) string {
	neg := nano < 0
	if neg {
		if nano == math.MinInt64 {
			return "-9223372036.854775808"
		}
		nano = -nano
	}
	s := strconv.FormatInt(nano/NanoPerUSD, 10)
	if frac := nano % NanoPerUSD; frac != 0 {
		f := strconv.FormatInt(frac+NanoPerUSD, 10)[1:] // 9 digits, zero-padded
		s += "." + strings.TrimRight(f, "0")
	}
	if neg {
		s = "-" + s
	}
	return s
}

// USD converts nano-USD to a float for display only (usage.cost_usd).
func USD(nano int64) float64 { return float64(nano) / NanoPerUSD }
