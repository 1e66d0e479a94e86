package main

import (
	"math"
	"testing"
	"time"
)

func TestHistExactSmallValues(t *testing.T) {
	var h Hist
	for v := 0; v < 256; v++ {
		h.Record(time.Duration(v))
	}
	if h.Count() != 256 || h.Min() != 0 || h.Max() != 255 {
		t.Fatalf("count %d min %v max %v", h.Count(), h.Min(), h.Max())
	}
	// Below 256 ns every bucket is one value wide.
	if q := h.Quantile(0.5); q != 127 {
		t.Fatalf("p50 of 0..255 = %d, want 127", q)
	}
	if q := h.Quantile(1); q != 255 {
		t.Fatalf("p100 = %d", q)
	}
}

func TestHistBucketsCoverValues(t *testing.T) {
	for _, v := range []int64{0, 1, 255, 256, 257, 1000, 12345, 1 << 20, 987654321, histMaxVal} {
		i := histIndex(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("value %d: index %d outside [0,%d)", v, i, histBuckets)
		}
		lo, w := histBounds(i)
		if v < lo || v >= lo+w {
			t.Fatalf("value %d in bucket %d = [%d,%d)", v, i, lo, lo+w)
		}
		if float64(w)/float64(max(lo, 1)) > 1.0/128+1e-12 && lo >= 256 {
			t.Fatalf("bucket %d too wide: %d at %d", i, w, lo)
		}
	}
}

func TestHistUniformPercentiles(t *testing.T) {
	var h Hist
	// 1 µs .. 100 ms, uniform.
	const n = 100_000
	for i := 1; i <= n; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := q * n * 1000 // ns
		got := float64(h.Quantile(q))
		if math.Abs(got-want)/want > 0.005 {
			t.Errorf("q%.3f = %.0f ns, want %.0f ±0.5%%", q, got, want)
		}
	}
	if m := h.Mean(); math.Abs(float64(m)-50_000.5e3) > 1 {
		t.Errorf("mean %v", m)
	}
	s := h.Summary()
	if s.Count != n || math.Abs(s.P99-99_000) > 500 || s.Max != 100_000 {
		t.Errorf("summary %+v", s)
	}
}

func TestHistMergeClampReset(t *testing.T) {
	var a, b Hist
	a.Record(-5 * time.Second) // counts as 0
	b.Record(100 * time.Hour)  // clamped
	b.Record(time.Millisecond)
	a.Merge(&b)
	if a.Count() != 3 || a.Min() != 0 || int64(a.Max()) != histMaxVal {
		t.Fatalf("merged: n %d min %v max %v", a.Count(), a.Min(), a.Max())
	}
	if q := a.Quantile(0.5); math.Abs(float64(q-time.Millisecond)) > float64(time.Millisecond)/200 {
		t.Fatalf("p50 %v", q)
	}
	var empty Hist
	a.Merge(&empty)
	if a.Count() != 3 {
		t.Fatal("merging an empty histogram changed the count")
	}
	a.Reset()
	if a.Count() != 0 || a.Quantile(0.99) != 0 || a.Mean() != 0 {
		t.Fatal("reset histogram not empty")
	}
}

func TestHistRecordDoesNotAllocate(t *testing.T) {
	var h Hist
	if n := testing.AllocsPerRun(1000, func() { h.Record(1234567) }); n != 0 {
		t.Fatalf("Record allocates %.0f times", n)
	}
}
