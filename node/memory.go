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
//
// Once, when the node turns ready, it also unmaps the executable's pages
// that only the start used (dropCodePages).
func (n *Node) releaseMemory(ctx context.Context, every time.Duration, threshold uint64) {
	t := time.NewTicker(every)
	defer t.Stop()
	r := memReleaser{threshold: threshold, costShare: releaseCostShare}
	var ms runtime.MemStats
	// Until the node is ready, also watch for that, to drop the pages of
	// code only the start used (dropCodePages) once.
	poll := time.NewTicker(readyPoll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			if n.Ready() {
				poll.Stop()
				b, err := dropCodePages()
				n.log.Debug("dropped the start's code pages", "bytes_advised", b, "err", err)
			}
			continue
		case <-t.C:
		}
		runtime.ReadMemStats(&ms)
		now := time.Now()
		if r.due(now, &ms) {
			cpu0 := processCPU()
			releaseHeap()
			took := time.Since(now)
			// On a busy machine the wall time is mostly waiting for a core:
			// the cost is the CPU the release used, when it can be read.
			if cpu0 >= 0 {
				took = min(took, processCPU()-cpu0)
			}
			runtime.ReadMemStats(&ms)
			r.released(now, took, ms.HeapAlloc)
		}
	}
}

// releaseHeap collects the heap twice, then returns its free pages to the
// OS. One collection is not enough after a burst: what sync.Pools hold
// (the upstream read buffers, net/http's and the upstream client's bufio
// readers and writers: ~90 MB after the harness's 5,000 req/s open loop)
// survives the first collection in the pools' victim caches, and an idle
// node runs no second one.
func releaseHeap() {
	runtime.GC()
	debug.FreeOSMemory()
}

// readyPoll is how often releaseMemory checks whether the node is ready.
const readyPoll = 50 * time.Millisecond

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
	live      uint64 // the heap left after the last release: what the node holds at rest
}

// due reports whether a release should run now, given the heap's state.
func (r *memReleaser) due(now time.Time, ms *runtime.MemStats) bool {
	if now.Before(r.next) {
		return false
	}
	// The last rule catches a burst's garbage that no GC has collected yet:
	// an idle node runs none, so its dead objects still count as in use.
	return ms.HeapIdle-ms.HeapReleased > r.threshold || ms.HeapAlloc < ms.HeapInuse/2 ||
		r.live > 0 && ms.HeapInuse > 2*r.live+r.threshold
}

// released records a release that started at start and took took (of
// CPU), leaving live bytes of heap.
func (r *memReleaser) released(start time.Time, took time.Duration, live uint64) {
	r.next = start.Add(time.Duration(float64(took) / r.costShare))
	r.live = live
}
