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
			r.released(now, took, &ms)
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

// memReleaser decides when a forced release of memory is worth it, and
// not before the last release's duration, divided by costShare, has passed
// since it started. A release is worth it when enough idle heap is held,
// when the heap is mostly free, or when the node has gone quiet with its
// heap grown well past what it held at rest.
//
// The last rule is what gives a burst's memory back: an idle node runs no
// GC, so the burst's dead objects still count as in use and its goal stays
// as high as the burst left it. It compares with the heap a release left
// while the node was quiet; one made during a burst measures the burst.
type memReleaser struct {
	threshold uint64  // idle heap bytes not yet returned that warrant a release
	costShare float64 // the most of the time releases may take
	next      time.Time

	rest  uint64 // heap in use after the last release made while quiet: what the node holds at rest
	seen  look   // the heap at the last look, to tell a quiet node
	quiet bool   // whether the last look found the node quiet
}

// look is what tells a quiet node from one under load: no collection and
// little growth of the heap (under a quarter of the threshold: what health
// checks, scrapes and gossip allocate) between two looks.
type look struct {
	gcs   uint32
	inuse uint64
}

// due reports whether a release should run now, given the heap's state. It
// is called once per tick: it also records the heap for the next call.
func (r *memReleaser) due(now time.Time, ms *runtime.MemStats) bool {
	r.quiet = ms.NumGC == r.seen.gcs && ms.HeapInuse <= r.seen.inuse+r.threshold/4
	r.seen = look{gcs: ms.NumGC, inuse: ms.HeapInuse}
	if now.Before(r.next) {
		return false
	}
	return ms.HeapIdle-ms.HeapReleased > r.threshold || ms.HeapAlloc < ms.HeapInuse/2 ||
		r.quiet && ms.HeapInuse > r.rest+r.threshold
}

// released records a release that started at start and took took (of
// CPU), leaving the heap as ms shows it.
func (r *memReleaser) released(start time.Time, took time.Duration, ms *runtime.MemStats) {
	r.next = start.Add(time.Duration(float64(took) / r.costShare))
	if r.quiet {
		r.rest = ms.HeapInuse
	}
	// The release's own collections are not load.
	r.seen = look{gcs: ms.NumGC, inuse: ms.HeapInuse}
}
