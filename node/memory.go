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
func (n *Node) releaseMemory(ctx context.Context, every time.Duration, threshold uint64) {
	t := time.NewTicker(every)
	defer t.Stop()
	var ms runtime.MemStats
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		runtime.ReadMemStats(&ms)
		if ms.HeapIdle-ms.HeapReleased > threshold || ms.HeapAlloc < ms.HeapInuse/2 {
			debug.FreeOSMemory()
		}
	}
}
