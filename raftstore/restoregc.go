package raftstore

import (
	"runtime/debug"
	"sync"
)

// restoreGCPercent is the GC percent while a snapshot is restored. A
// restore allocates the new state and little garbage besides, so the
// collections a growing heap triggers at the default 100 find almost
// nothing to free; at 400 there are about a third as many, for a heap peak
// little above the restored state itself.
const restoreGCPercent = 400

// gcBoost raises the process's GC percent while at least one restore runs
// and puts back what it was when the last one ends.
var gcBoost struct {
	mu     sync.Mutex
	active int
	saved  int
}

// boostGC raises the GC percent to restoreGCPercent (never lowers it, and
// leaves GC off if it is off) until the returned function is called.
func boostGC() (restore func()) {
	gcBoost.mu.Lock()
	defer gcBoost.mu.Unlock()
	if gcBoost.active == 0 {
		gcBoost.saved = debug.SetGCPercent(restoreGCPercent)
		if gcBoost.saved < 0 || gcBoost.saved > restoreGCPercent {
			debug.SetGCPercent(gcBoost.saved)
		}
	}
	gcBoost.active++
	var once sync.Once
	return func() {
		once.Do(func() {
			gcBoost.mu.Lock()
			defer gcBoost.mu.Unlock()
			if gcBoost.active--; gcBoost.active == 0 {
				debug.SetGCPercent(gcBoost.saved)
			}
		})
	}
}
