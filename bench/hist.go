package main

import (
	"encoding/json"
	"math/bits"
	"sort"
	"strconv"
	"time"
)

// Hist is a log-linear histogram of non-negative durations in nanoseconds:
// exact below 256 ns, then 128 sub-buckets per power of two (relative error
// under 0.8 %). Histograms from separate runs merge exactly, so slices of a
// mode measured at different times combine into one distribution.
type Hist struct {
	counts map[int]int64
	n      int64
	max    int64
	sum    int64
}

const subBits = 7 // 128 sub-buckets per octave

func newHist() *Hist { return &Hist{counts: map[int]int64{}} }

func bucketOf(v int64) int {
	if v < 0 {
		v = 0
	}
	if v < 2<<subBits {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - (subBits + 1)
	return (2 << subBits) + (shift-1)<<subBits + int(uint64(v)>>shift) - (1 << subBits)
}

// lowOf is the smallest value of bucket i; midOf its middle.
func lowOf(i int) int64 {
	if i < 2<<subBits {
		return int64(i)
	}
	j := i - (2 << subBits)
	shift := j>>subBits + 1
	mant := int64(j&(1<<subBits-1)) + 1<<subBits
	return mant << shift
}

func midOf(i int) int64 {
	if i < 2<<subBits {
		return int64(i)
	}
	return (lowOf(i) + lowOf(i+1)) / 2
}

// Add records one value.
func (h *Hist) Add(v int64) {
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)]++
	h.n++
	h.sum += v
	if v > h.max {
		h.max = v
	}
}

// Merge adds o into h.
func (h *Hist) Merge(o *Hist) {
	if o == nil {
		return
	}
	for k, c := range o.counts {
		h.counts[k] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// Count is the number of values.
func (h *Hist) Count() int64 {
	if h == nil {
		return 0
	}
	return h.n
}

// Quantile returns the q-quantile (0..1) in nanoseconds; the top is exact.
func (h *Hist) Quantile(q float64) int64 {
	if h == nil || h.n == 0 {
		return 0
	}
	if q >= 1 {
		return h.max
	}
	keys := make([]int, 0, len(h.counts))
	for k := range h.counts {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	rank := int64(q*float64(h.n-1)) + 1
	var seen int64
	for _, k := range keys {
		seen += h.counts[k]
		if seen >= rank {
			return min(midOf(k), h.max)
		}
	}
	return h.max
}

// FracAbove is the share of values above v nanoseconds (to the bucket's
// precision).
func (h *Hist) FracAbove(v int64) float64 {
	if h == nil || h.n == 0 {
		return 0
	}
	b := bucketOf(v)
	var above int64
	for k, c := range h.counts {
		if k > b {
			above += c
		}
	}
	return float64(above) / float64(h.n)
}

// Mean in nanoseconds.
func (h *Hist) Mean() float64 {
	if h == nil || h.n == 0 {
		return 0
	}
	return float64(h.sum) / float64(h.n)
}

// Pcts are the usual percentiles in milliseconds.
type Pcts struct {
	N    int64   `json:"n"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

func ms(ns int64) float64 { return float64(ns) / float64(time.Millisecond) }

// Pcts summarises h.
func (h *Hist) Pcts() Pcts {
	if h == nil || h.n == 0 {
		return Pcts{}
	}
	return Pcts{N: h.n, P50: ms(h.Quantile(0.50)), P90: ms(h.Quantile(0.90)), P99: ms(h.Quantile(0.99)),
		P999: ms(h.Quantile(0.999)), Max: ms(h.max), Mean: h.Mean() / float64(time.Millisecond)}
}

type histJSON struct {
	Counts map[string]int64 `json:"counts"`
	N      int64            `json:"n"`
	Max    int64            `json:"max"`
	Sum    int64            `json:"sum"`
}

func (h *Hist) MarshalJSON() ([]byte, error) {
	j := histJSON{Counts: make(map[string]int64, len(h.counts)), N: h.n, Max: h.max, Sum: h.sum}
	for k, c := range h.counts {
		j.Counts[strconv.Itoa(k)] = c
	}
	return json.Marshal(j)
}

func (h *Hist) UnmarshalJSON(b []byte) error {
	var j histJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	h.counts = make(map[int]int64, len(j.Counts))
	for k, c := range j.Counts {
		i, err := strconv.Atoi(k)
		if err != nil {
			return err
		}
		h.counts[i] = c
	}
	h.n, h.max, h.sum = j.N, j.Max, j.Sum
	return nil
}
