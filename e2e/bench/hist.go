package main

import (
	"math"
	"math/bits"
	"time"
)

// Hist is a fixed-size log-linear histogram of durations in nanoseconds
// (HDR-style): values below 256 ns are exact, larger ones fall into one of
// 128 linear sub-buckets per power of two, so a recorded value is known to
// within 0.4%. Recording never allocates; the array is about 36 KB.
// A Hist is not safe for concurrent use: give every worker its own and
// Merge them afterwards.
type Hist struct {
	counts   [histBuckets]uint64
	n        uint64
	sum      float64
	min, max int64
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits // 128
	histMaxBits = 41               // values up to 2^41 ns (~36 minutes)
	histBuckets = (histMaxBits - histSubBits + 1) * histSub
	histMaxVal  = int64(1)<<histMaxBits - 1
)

// histIndex maps a non-negative value to its bucket.
func histIndex(v int64) int {
	if v < 2*histSub {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - (histSubBits + 1)
	m := v >> uint(shift) // in [128, 256)
	return (shift+1)*histSub + int(m-histSub)
}

// histBounds returns the smallest value of bucket i and the bucket's width.
func histBounds(i int) (lo, width int64) {
	if i < 2*histSub {
		return int64(i), 1
	}
	shift := i/histSub - 1
	m := int64(i%histSub + histSub)
	return m << uint(shift), int64(1) << uint(shift)
}

// Record adds one value; negative values count as 0, huge ones are clamped.
func (h *Hist) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	} else if v > histMaxVal {
		v = histMaxVal
	}
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.counts[histIndex(v)]++
	h.n++
	h.sum += float64(v)
}

// Count is the number of recorded values.
func (h *Hist) Count() uint64 { return h.n }

// Reset empties the histogram.
func (h *Hist) Reset() { *h = Hist{} }

// Merge adds o's values to h.
func (h *Hist) Merge(o *Hist) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// Mean is the exact mean of the recorded values.
func (h *Hist) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Max is the largest recorded value.
func (h *Hist) Max() time.Duration { return time.Duration(h.max) }

// Min is the smallest recorded value.
func (h *Hist) Min() time.Duration { return time.Duration(h.min) }

// Quantile returns the value at quantile q (0..1): the midpoint of the
// bucket holding the ceil(q*n)-th smallest value, clamped to the exact
// minimum and maximum.
func (h *Hist) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	if rank > h.n {
		rank = h.n
	}
	var seen uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		if seen >= rank {
			lo, w := histBounds(i)
			v := lo + (w-1)/2
			v = max(v, h.min)
			v = min(v, h.max)
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}

// Percentiles are the summary figures of a histogram, in microseconds.
type Percentiles struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean_us"`
	P50   float64 `json:"p50_us"`
	P90   float64 `json:"p90_us"`
	P99   float64 `json:"p99_us"`
	P999  float64 `json:"p999_us"`
	Max   float64 `json:"max_us"`
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// Summary returns h's percentiles.
func (h *Hist) Summary() Percentiles {
	return Percentiles{Count: h.n, Mean: us(h.Mean()), P50: us(h.Quantile(0.5)), P90: us(h.Quantile(0.9)),
		P99: us(h.Quantile(0.99)), P999: us(h.Quantile(0.999)), Max: us(h.Max())}
}
