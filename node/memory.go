package node

import (
	"context"
	"runtime"
	"runtime/debug"
	"time"
)

// releaseMemory hands memory the heap no longer uses back to the OS when a
// burst of load is over. Go's own scavenger does this only slowly, and an
// idle process runs no GC at all, so a node that once held thousands of
// requests in flight would otherwise keep that RSS indefinitely.
//
// Returning it forces a full GC, whose cost grows with the live heap: a
// few milliseconds for a small state, one to three CPU-seconds for a
// million keys. So the releases are spaced by their own cost (see
// memReleaser): a small node still gives memory back within one tick of a
// burst, a large one never spends more than a few percent of a core on it.
func (n *Node) releaseMemory(ctx context.Context, every time.Duration, threshold uint64) {
	t := time.NewTicker(every)
	defer t.Stop()
	r := memReleaser{threshold: threshold, costShare: releaseCostShare}
	var ms runtime.MemStats
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		runtime.ReadMemStats(&ms)
		now := time.Now()
		if r.due(now, &ms) {
			debug.FreeOSMemory()
			r.released(now, time.Since(now))
		}
	}
}

// releaseCostShare is the most of the wall time forced releases may take.
const releaseCostShare = 0.02

// memReleaser decides when a forced release of memory is worth it: when
// enough idle heap is held (or the heap is mostly free), and not before
// the last release's duration, divided by costShare, has passed since it
// started.
type memReleaser struct {
	threshold uint64  // idle heap bytes not yet returned that warrant a release
	costShare float64 // the most of the time releases may take
	next      time.Time
}

// due reports whether a release should run now, given the heap's state.
func (r *memReleaser) due(now time.Time, ms *runtime.MemStats) bool {
	if now.Before(r.next) {
		return false
	}
	return ms.HeapIdle-ms.HeapReleased > r.threshold || ms.HeapAlloc < ms.HeapInuse/2
}

// released records a release that started at start and took took.
func (r *memReleaser) released(start time.Time, took time.Duration) {
	r.next = start.Add(time.Duration(float64(took) / r.costShare))
}
