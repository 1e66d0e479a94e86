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

// A small heap's release costs a few milliseconds: the next may follow on
// the next tick when idle pages are held again.
func TestMemoryReleaseOfSmallHeapDueEveryTick(t *testing.T) {
	r := memReleaser{threshold: 32 << 20, costShare: 0.02}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r.released(t0, 5*time.Millisecond, &runtime.MemStats{HeapInuse: 10 << 20, NextGC: 20 << 20})
	idle := &runtime.MemStats{NumGC: 9, HeapIdle: 60 << 20, HeapReleased: 4 << 20, HeapAlloc: 25 << 20, HeapInuse: 30 << 20, NextGC: 20 << 20}
	if !r.due(t0.Add(5*time.Second), idle) {
		t.Fatal("56 MB of idle heap not returned, 5 s after a 5 ms release: a release is due")
	}
	busy := &runtime.MemStats{NumGC: 12, TotalAlloc: 1 << 30, HeapIdle: 8 << 20, HeapAlloc: 25 << 20, HeapInuse: 30 << 20, NextGC: 20 << 20}
	if r.due(t0.Add(5*time.Second), busy) {
		t.Fatal("8 MB idle and the heap mostly in use: no release is due")
	}
}

// tick is the time of the releaser's i-th look, 5 s apart.
func tick(i int) time.Time {
	return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 5 * time.Second)
}

// settle runs the releaser's first looks at a node at rest and a release
// there that leaves rest: from then on the node holds rest's heap at rest.
func settle(r *memReleaser, rest *runtime.MemStats) {
	before := *rest
	before.HeapAlloc += 20 << 20
	r.due(tick(0), &before)
	r.due(tick(1), &before)
	r.released(tick(1), 5*time.Millisecond, rest)
}

// A burst's garbage that no GC has collected yet (an idle node runs none)
// looks in use, and the goal its live heap set lets the heap grow that far
// again. While the burst allocates, its own collections run and nothing is
// forced; once the node is quiet (little allocated between two looks), a
// goal well above the one at rest is due.
func TestMemoryReleaseDueForUncollectedGarbageOnceQuiet(t *testing.T) {
	r := memReleaser{threshold: 32 << 20, costShare: 0.02}
	settle(&r, &runtime.MemStats{NumGC: 5, TotalAlloc: 1 << 30, HeapAlloc: 38 << 20, HeapInuse: 40 << 20, NextGC: 76 << 20})
	burst := &runtime.MemStats{NumGC: 9, TotalAlloc: 2 << 30, HeapIdle: 80 << 20, HeapAlloc: 190 << 20, HeapInuse: 200 << 20, NextGC: 380 << 20}
	if r.due(tick(2), burst) {
		t.Fatal("a GB allocated since the last look: the node is busy and its GC runs by itself; no release is due, even with 80 MB idle")
	}
	busy := &runtime.MemStats{NumGC: 14, TotalAlloc: 3 << 30, HeapAlloc: 230 << 20, HeapInuse: 240 << 20, NextGC: 400 << 20}
	if r.due(tick(3), busy) {
		t.Fatal("a GB allocated since the last look: no release is due")
	}
	// The burst is over: the heap stays where it ended, and no collection
	// runs. The first quiet look releases.
	if !r.due(tick(4), busy) {
		t.Fatal("240 MB in use and a 400 MB goal on a quiet node whose goal at rest was 76 MB: a release is due")
	}
	r.released(tick(4), 5*time.Millisecond, &runtime.MemStats{NumGC: 16, TotalAlloc: 3 << 30, HeapAlloc: 39 << 20, HeapInuse: 41 << 20, NextGC: 78 << 20})
	// Back at rest: nothing more to do.
	for i := 5; i < 10; i++ {
		settled := &runtime.MemStats{NumGC: 16, TotalAlloc: 3<<30 + uint64(i)<<20, HeapAlloc: 44 << 20, HeapInuse: 45 << 20, NextGC: 78 << 20}
		if r.due(tick(i), settled) {
			t.Fatalf("look %d: a node at rest with its goal where the last release left it: no release is due", i)
		}
	}
}

// Under a burst's large goal a collection can be rarer than a look, and
// a heap at its goal stays the same size: neither tells the burst from
// rest, what it allocates does. A release made during the burst would
// measure the burst's heap as the node's heap at rest, and the load's CPU
// as its own cost.
func TestMemoryReleaseWaitsForTheBurstToEnd(t *testing.T) {
	r := memReleaser{threshold: 32 << 20, costShare: 0.02}
	settle(&r, &runtime.MemStats{NumGC: 5, TotalAlloc: 1 << 30, HeapAlloc: 10 << 20, HeapInuse: 12 << 20, NextGC: 20 << 20})
	burst := &runtime.MemStats{NumGC: 8, TotalAlloc: 2 << 30, HeapIdle: 60 << 20, HeapAlloc: 300 << 20, HeapInuse: 310 << 20, NextGC: 600 << 20}
	for i := 2; i < 6; i++ {
		burst.TotalAlloc += 1 << 30 // no collection between the looks, the heap as large
		if r.due(tick(i), burst) {
			t.Fatalf("look %d: a GB allocated since the last look: no release is due, even with 60 MB idle", i)
		}
	}
	over := &runtime.MemStats{NumGC: 8, TotalAlloc: burst.TotalAlloc + 1<<20, HeapAlloc: 310 << 20, HeapInuse: 320 << 20, NextGC: 600 << 20}
	if !r.due(tick(6), over) {
		t.Fatal("the burst is over, with 320 MB in use and a 600 MB goal on a node whose goal at rest was 20 MB: a release is due")
	}
}

// A quiet node is not released again and again: a heap that a full
// collection leaves sparse (objects spread over many spans, which no
// release can return) stays sparse, and idle allocation up to the goal at
// rest is what the node's own collections take care of.
func TestMemoryReleaseNotRepeatedOnQuietNode(t *testing.T) {
	r := memReleaser{threshold: 32 << 20, costShare: 0.02}
	sparse := &runtime.MemStats{NumGC: 5, TotalAlloc: 1 << 30, HeapAlloc: 10 << 20, HeapInuse: 25 << 20, NextGC: 20 << 20}
	settle(&r, sparse)
	for i := 2; i < 40; i++ {
		ms := *sparse
		ms.TotalAlloc += uint64(i) << 20
		ms.HeapAlloc += uint64(i%8) << 20 // idle allocation, collected at the goal
		ms.NumGC += uint32(i / 8)
		if r.due(tick(i), &ms) {
			t.Fatalf("look %d: a node at rest (%d MB allocated of %d MB in use, goal as at rest) is released again", i, ms.HeapAlloc>>20, ms.HeapInuse>>20)
		}
	}
}

// Light steady load allocates too little between two looks to tell it
// from rest, and its collections come far apart on a large heap. Its heap
// growing towards the goal is not a burst's garbage: no forced collection.
func TestMemoryReleaseLeavesLightLoadToTheGC(t *testing.T) {
	r := memReleaser{threshold: 32 << 20, costShare: 0.02}
	rest := &runtime.MemStats{NumGC: 5, TotalAlloc: 1 << 30, HeapAlloc: 300 << 20, HeapInuse: 310 << 20, NextGC: 600 << 20}
	settle(&r, rest)
	ms := *rest
	for i := 2; i < 200; i++ {
		ms.TotalAlloc += 6 << 20 // 1.2 MB/s
		ms.HeapAlloc += 6 << 20
		if ms.HeapAlloc >= ms.NextGC {
			ms.HeapAlloc, ms.NumGC = 300<<20, ms.NumGC+1 // the node's own collection
		}
		ms.HeapInuse = ms.HeapAlloc + 10<<20
		if r.due(tick(i), &ms) {
			t.Fatalf("look %d: light load with %d MB allocated of a 600 MB goal is forced to collect", i, ms.HeapAlloc>>20)
		}
	}
}

// The reference follows the node's state: a node whose live heap grew
// (keys added) is released once when it turns quiet, then left alone.
func TestMemoryReleaseFollowsGrownState(t *testing.T) {
	r := memReleaser{threshold: 32 << 20, costShare: 0.02}
	settle(&r, &runtime.MemStats{NumGC: 5, TotalAlloc: 1 << 30, HeapAlloc: 10 << 20, HeapInuse: 12 << 20, NextGC: 20 << 20})
	// Keys are added: the live heap grows to 100 MB.
	for i := 2; i < 6; i++ {
		ms := &runtime.MemStats{NumGC: uint32(5 + 3*i), TotalAlloc: uint64(1+i) << 30, HeapAlloc: uint64(25*i) << 20, HeapInuse: uint64(25*i+5) << 20, NextGC: uint64(50*i) << 20}
		if r.due(tick(i), ms) {
			t.Fatalf("look %d: keys being added: no release is due", i)
		}
	}
	grown := &runtime.MemStats{NumGC: 20, TotalAlloc: 6 << 30, HeapAlloc: 128 << 20, HeapInuse: 133 << 20, NextGC: 200 << 20}
	if !r.due(tick(6), grown) {
		t.Fatal("a quiet node whose goal went from 20 MB to 200 MB: one release is due")
	}
	r.released(tick(6), 50*time.Millisecond, &runtime.MemStats{NumGC: 22, TotalAlloc: 6 << 30, HeapAlloc: 100 << 20, HeapInuse: 104 << 20, NextGC: 200 << 20})
	for i := 9; i < 60; i++ {
		ms := &runtime.MemStats{NumGC: 22, TotalAlloc: 6<<30 + uint64(i)<<20, HeapAlloc: uint64(100+i) << 20, HeapInuse: uint64(105+i) << 20, NextGC: 200 << 20}
		if r.due(tick(i), ms) {
			t.Fatalf("look %d: the grown state at rest, with the goal its release left: no release is due", i)
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
