package node

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// runLoops are the background loops Run starts, as they appear in a goroutine dump.
var runLoops = []string{
	"node.(*Node).joinLoop(", "node.(*Node).runMembership(", "node.(*Node).runSpendReports(",
	"node.(*gossip).runRateGossip(", "node.(*Node).runRateStateSaves(", "node.(*Node).releaseMemory(",
	"node.(*clusterMetrics).watchLeader(", "node.(*Node).watchTLS(", "node.(*Node).becomeReady(",
}

// runningLoops counts the goroutines that are inside one of Run's loops.
func runningLoops() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, fn := range runLoops {
			if strings.Contains(g, fn) {
				count++
				break
			}
		}
	}
	return count
}

// Close, even while Run is still running (a crash in the tests, an embedding program that
// closes first), returns only after Run's background loops have: none of them may use the
// store, the ledger or gossip after those closed.
func TestCloseWaitsForRunsBackgroundLoops(t *testing.T) {
	before := runningLoops()
	tn := startNode(t, baseConfig(t, "loops", testLogger(t)))
	tn.waitReady(15 * time.Second)
	if n := runningLoops(); n < before+5 {
		t.Fatalf("%d loop goroutines while running, %d before: the dump no longer names Run's loops", n, before)
	}
	tn.n.Close()
	if n := runningLoops(); n > before {
		t.Fatalf("%d of Run's loop goroutines still running after Close returned (%d before the node started)", n-before, before)
	}
}

// Run after Close starts nothing and says so.
func TestRunAfterCloseFails(t *testing.T) {
	tn := newTNode(t, baseConfig(t, "closed", testLogger(t)))
	tn.n.Close()
	if err := tn.n.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "Run after Close") {
		t.Fatalf("Run after Close = %v, want an error", err)
	}
}
