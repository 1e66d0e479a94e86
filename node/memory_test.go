package node

import (
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

func TestMemoryReleaseWaitsInProportionToItsCost(t *testing.T) {
	r := memReleaser{threshold: 32 << 20, costShare: 0.02}
	idle := &runtime.MemStats{HeapIdle: 100 << 20, HeapReleased: 10 << 20, HeapAlloc: 50 << 20, HeapInuse: 60 << 20}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if !r.due(t0, idle) {
		t.Fatal("90 MB of idle heap over a 32 MB threshold: a release is due")
	}
	r.released(t0, 2*time.Second, &runtime.MemStats{HeapInuse: 800 << 20}) // a full GC of a large heap
	for _, after := range []time.Duration{5 * time.Second, 30 * time.Second, 99 * time.Second} {
		if r.due(t0.Add(after), idle) {
			t.Fatalf("a release that took 2 s is due again %v later; want none before 100 s (2%% of the time)", after)
		}
	}
	if !r.due(t0.Add(100*time.Second), idle) {
		t.Fatal("no release due 100 s after one that took 2 s")
	}
}

func TestMemoryReleaseOfSmallHeapDueEveryTick(t *testing.T) {
	r := memReleaser{threshold: 32 << 20, costShare: 0.02}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r.released(t0, 5*time.Millisecond, &runtime.MemStats{HeapInuse: 10 << 20})
	mostlyFree := &runtime.MemStats{HeapAlloc: 10 << 20, HeapInuse: 30 << 20}
	if !r.due(t0.Add(5*time.Second), mostlyFree) {
		t.Fatal("a heap two-thirds free, 5 s after a 5 ms release: a release is due")
	}
	busy := &runtime.MemStats{HeapIdle: 8 << 20, HeapAlloc: 25 << 20, HeapInuse: 30 << 20}
	if r.due(t0.Add(5*time.Second), busy) {
		t.Fatal("8 MB idle and the heap mostly in use: no release is due")
	}
}

// A burst's garbage that no GC has collected yet (an idle node runs none)
// looks in use. Once the node is quiet (no collection and no growth
// between two looks), a heap grown well past what it held at rest is due,
// even when a release during the burst found far more live.
func TestMemoryReleaseDueForUncollectedGarbageOnceQuiet(t *testing.T) {
	r := memReleaser{threshold: 32 << 20, costShare: 0.02}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tick := func(i int) time.Time { return t0.Add(time.Duration(i) * 5 * time.Second) }
	// At rest: two looks alike, and the release leaves 40 MB.
	atRest := &runtime.MemStats{NumGC: 3, HeapAlloc: 70 << 20, HeapInuse: 72 << 20}
	r.due(tick(0), atRest)
	if !r.due(tick(1), atRest) {
		t.Fatal("72 MB in use on a quiet node that has never released: a release is due")
	}
	r.released(tick(1), 5*time.Millisecond, &runtime.MemStats{NumGC: 5, HeapAlloc: 38 << 20, HeapInuse: 40 << 20})

	// The burst: collections run, and a release during it (due for its
	// idle pages) finds 200 MB live.
	burst := &runtime.MemStats{NumGC: 9, HeapIdle: 80 << 20, HeapAlloc: 190 << 20, HeapInuse: 200 << 20}
	if !r.due(tick(2), burst) {
		t.Fatal("80 MB of idle heap: a release is due")
	}
	r.released(tick(2), 20*time.Millisecond, &runtime.MemStats{NumGC: 11, HeapAlloc: 198 << 20, HeapInuse: 200 << 20})
	busy := &runtime.MemStats{NumGC: 14, HeapAlloc: 230 << 20, HeapInuse: 240 << 20}
	if r.due(tick(3), busy) {
		t.Fatal("collections still running: the node is busy and its GC runs by itself; no release is due")
	}
	// The burst is over: the heap stays where it ended, and no collection
	// runs. The first quiet look releases.
	if !r.due(tick(4), busy) {
		t.Fatal("240 MB in use on a quiet node that held 40 MB at rest: a release is due")
	}
	r.released(tick(4), 5*time.Millisecond, &runtime.MemStats{NumGC: 16, HeapAlloc: 39 << 20, HeapInuse: 41 << 20})
	// Back at rest, a little over what it held before: nothing more to do.
	settled := &runtime.MemStats{NumGC: 16, HeapAlloc: 44 << 20, HeapInuse: 45 << 20}
	for i := 5; i < 10; i++ {
		if r.due(tick(i), settled) {
			t.Fatalf("look %d: 45 MB in use on a node that held 41 MB at rest (under 32 MB more): no release is due", i)
		}
	}
}

// idleBuffers stands for the sync.Pools of the data plane (read buffers,
// bufio readers and writers) that a burst fills.
var idleBuffers sync.Pool

// A release after a burst frees what the pools still hold: one collection
// only moves a pool's contents to its victim cache, where they stay live
// on a node that runs no further collection.
func TestMemoryReleaseEmptiesIdlePools(t *testing.T) {
	releaseHeap()
	const n, size = 64, 1 << 20
	// No collection while the pool fills: each would move it on.
	gc := debug.SetGCPercent(-1)
	for range n {
		b := make([]byte, size)
		idleBuffers.Put(&b)
	}
	debug.SetGCPercent(gc)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	releaseHeap()
	runtime.ReadMemStats(&after)
	// The race detector drops a quarter of Puts, which one collection
	// frees too; the pooled rest must go as well.
	if freed := int64(before.HeapAlloc) - int64(after.HeapAlloc); freed < n*size*5/8 {
		t.Errorf("a release freed %d MiB of %d MiB of pooled buffers; the rest stayed live in the pool", freed>>20, n*size>>20)
	}
}
