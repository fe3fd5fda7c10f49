package main

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHistBuckets(t *testing.T) {
	for _, v := range []int64{0, 1, 255, 256, 257, 511, 512, 1000, 123456, 1e9, 1e12} {
		i := bucketOf(v)
		if lo, hi := lowOf(i), lowOf(i+1); v < lo || v >= hi {
			t.Errorf("%d in bucket %d = [%d,%d)", v, i, lo, hi)
		}
	}
}

func TestHistQuantiles(t *testing.T) {
	h := newHist()
	var vals []int64
	for range 100000 {
		v := rand.Int64N(50_000_000)
		vals = append(vals, v)
		h.Add(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		want := vals[int(q*float64(len(vals)-1))]
		got := h.Quantile(q)
		if d := float64(got-want) / float64(want); d > 0.01 || d < -0.01 {
			t.Errorf("q%.2f = %d, want %d within 1%%", q, got, want)
		}
	}
	if h.Quantile(1) != vals[len(vals)-1] {
		t.Errorf("max = %d, want %d", h.Quantile(1), vals[len(vals)-1])
	}
	b, _ := json.Marshal(h)
	var back Hist
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	m := newHist()
	m.Merge(&back)
	m.Merge(h)
	if m.Count() != 2*h.Count() || m.Quantile(0.5) != h.Quantile(0.5) {
		t.Errorf("merge: n=%d p50=%d, want n=%d p50=%d", m.Count(), m.Quantile(0.5), 2*h.Count(), h.Quantile(0.5))
	}
}

func TestIntFieldAndStamp(t *testing.T) {
	b := requestBody(true, 200, 20000000)
	if n := intField(b, `"max_tokens":`, 0); n != 200 {
		t.Errorf("max_tokens = %d", n)
	}
	if n := intField(b, `"bench_interval_us":`, 0); n != 20000 {
		t.Errorf("interval = %d", n)
	}
	var d [tsWidth]byte
	stamp(d[:], 1764547200123456789)
	if string(d[:]) != "1764547200123456789" {
		t.Errorf("stamp = %s", d[:])
	}
	if !json.Valid(b) || !json.Valid(unaryAnswers[1]) || !json.Valid(unaryAnswers[answerTokens]) || !json.Valid(finishEventOf(3)[len("data: "):len(finishEventOf(3))-2]) || !json.Valid(tokenEvent[len("data: "):len(tokenEvent)-2]) {
		t.Error("a rendered body is not valid JSON")
	}
}
