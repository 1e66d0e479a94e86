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
// When the node turns ready, and after each release, it also unmaps the
// executable's read-only pages (dropCodePages): those only the start used,
// then those only the burst used; what serving uses faults back in.
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
		if now := time.Now(); r.due(now, &ms) {
			n.release(&r, &ms, now)
		}
	}
}

// release returns the heap's free memory and the executable's pages to
// the OS and records its cost in r; ms holds the heap's state before, and
// after it the heap's state after.
func (n *Node) release(r *memReleaser, ms *runtime.MemStats, start time.Time) {
	cpu0 := processCPU()
	releaseHeap()
	b, err := dropCodePages()
	took := time.Since(start)
	// On a busy machine the wall time is mostly waiting for a core: the
	// cost is the CPU the release used, when it can be read.
	if cpu0 >= 0 {
		took = min(took, processCPU()-cpu0)
	}
	inuse := ms.HeapInuse
	runtime.ReadMemStats(ms)
	r.released(start, took, ms)
	n.log.Debug("released memory", "heap_in_use_before", inuse, "heap_in_use_after", ms.HeapInuse,
		"goal", ms.NextGC, "code_bytes_advised", b, "err", err, "took", took)
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

// memReleaser decides when a forced release of memory is worth it: only
// once the node has gone quiet, and not before the last release's
// duration, divided by costShare, has passed since it started. A release
// is then worth it when enough idle heap is held, or when the GC's goal
// (NextGC) is well above what the last release left.
//
// Under load the node's own collections run, and a forced one would only
// add to them, measure the load's CPU as its own cost, and hand back pages
// the load takes again. When the load stops, no collection runs on an idle
// node: the burst's dead objects still count as in use, and the goal its
// live heap set lets the heap grow that far again. At rest a collection
// runs before the heap reaches the goal, and the goal follows the live
// heap: only a goal set by more live heap than the node holds now (a
// burst's) or a grown state passes the margin, and the release made then
// sets the next reference, so neither repeats on a node at rest.
//
// A node is quiet when it allocated little between two looks (under a
// quarter of the threshold: what health checks, scrapes and gossip
// allocate). Neither the count of collections nor the heap in use tells:
// under a burst's large goal a collection can be rarer than a look, and a
// heap at its goal reuses what its sweeps free instead of growing.
type memReleaser struct {
	threshold uint64  // idle heap bytes not yet returned that warrant a release
	costShare float64 // the most of the time releases may take
	next      time.Time

	restGoal  uint64 // the GC's goal after the last release: what the node allows itself at rest
	allocated uint64 // bytes allocated since the start, at the last look
}

// due reports whether a release should run now, given the heap's state. It
// is called once per tick: it also records the heap for the next call.
func (r *memReleaser) due(now time.Time, ms *runtime.MemStats) bool {
	quiet := ms.TotalAlloc-r.allocated <= r.threshold/4
	r.allocated = ms.TotalAlloc
	if !quiet || now.Before(r.next) {
		return false
	}
	return ms.HeapIdle-ms.HeapReleased > r.threshold || ms.NextGC > r.restGoal+r.restGoal/4
}

// released records a release that started at start and took took (of
// CPU), leaving the heap as ms shows it.
func (r *memReleaser) released(start time.Time, took time.Duration, ms *runtime.MemStats) {
	r.next = start.Add(time.Duration(float64(took) / r.costShare))
	r.restGoal = ms.NextGC
	r.allocated = ms.TotalAlloc // what the release allocated is not load
}
