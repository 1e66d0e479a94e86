package ratelimit

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func benchChecks(n int, prefix string) []Check {
	names := []string{"key:", "team:", "dep:gpt-4o/"}
	var cs []Check
	for i := range n {
		cs = append(cs, Check{Bucket: names[i] + prefix, Limits: Limits{RPM: 1 << 40, TPM: 1 << 50, MaxParallel: 1 << 20}})
	}
	return cs
}

// BenchmarkAdmit is Admit + Done on one node, with gossip state from two
// peers in every bucket.
func BenchmarkAdmit(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("buckets=%d", n), func(b *testing.B) {
			l := benchLimiter(b, n)
			checks := benchChecks(n, "bench")
			b.ReportAllocs()
			for b.Loop() {
				tk, r := l.Admit(checks, 500)
				if r != nil {
					b.Fatal(r)
				}
				tk.Done(400)
			}
		})
	}
}

// BenchmarkAdmitParallel runs Admit + Done from all Ps: on the same three
// buckets (one hot key), and on distinct ones per goroutine.
func BenchmarkAdmitParallel(b *testing.B) {
	for _, shared := range []bool{true, false} {
		name := "distinct-buckets"
		if shared {
			name = "same-buckets"
		}
		b.Run(name, func(b *testing.B) {
			l := benchLimiter(b, 3)
			var id atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				prefix := "bench"
				if !shared {
					prefix = fmt.Sprint("g", id.Add(1))
				}
				checks := benchChecks(3, prefix)
				for pb.Next() {
					tk, r := l.Admit(checks, 500)
					if r != nil {
						b.Error(r)
						return
					}
					tk.Done(400)
				}
			})
		})
	}
}

// benchLimiter is node a of a three-node cluster whose peers have
// reported usage of the bench buckets.
func benchLimiter(b *testing.B, n int) *Limiter {
	l := New(Config{NodeID: "a"})
	l.SetMembers([]string{"a", "b", "c"})
	for _, peer := range []string{"b", "c"} {
		p := New(Config{NodeID: peer})
		tk, _ := p.Admit(benchChecks(n, "bench"), 10)
		tk.Done(10)
		if err := l.MergeFull(p.FullState()); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

// BenchmarkSave is the node's once-a-second save of its usage, with every
// bucket busy in 10 of the last 60 seconds.
func BenchmarkSave(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			clk := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			l := New(Config{NodeID: "a", Now: func() time.Time { return clk }})
			for s := range 10 {
				for i := range n {
					tk, _ := l.Admit([]Check{{Bucket: "key:" + strconv.Itoa(i), Limits: Limits{RPM: 1 << 30}}}, 100)
					tk.Done(100)
				}
				clk = clk.Add(time.Duration(s+1) * time.Second)
			}
			b.ReportAllocs()
			var size int
			for b.Loop() {
				size = len(l.Save())
			}
			b.ReportMetric(float64(size), "bytes")
		})
	}
}
