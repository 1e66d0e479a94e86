package ledger

import (
	"os"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCloseWithPebbleStalledKeepsEveryRecord: a node shutting down while
// Pebble has stopped taking batches (a disk that no longer answers) must
// not hang, and must not lose what it acknowledged: Close gives up on the
// apply queue after its timeout and says so, the journal stays, and once
// the disk answers again a reopened ledger holds every record.
func TestCloseWithPebbleStalledKeepsEveryRecord(t *testing.T) {
	oldBytes, oldTimeout := applyQueueBytes, closeFlushTimeout
	applyQueueBytes, closeFlushTimeout = 4<<20, 300*time.Millisecond
	t.Cleanup(func() { applyQueueBytes, closeFlushTimeout = oldBytes, oldTimeout })
	var armed atomic.Bool
	release := make(chan struct{})
	baseFS = stallFS{vfs.Default, &armed, release}
	t.Cleanup(func() { baseFS = vfs.Default })
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir, NodeID: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	armed.Store(true)

	// Append until Pebble has visibly stopped taking batches: the apply
	// queue is congested. Every append returned is acknowledged.
	base := testBase()
	n := 0
	deadline := time.Now().Add(60 * time.Second)
	for !l.Congested() {
		if time.Now().After(deadline) {
			t.Fatalf("the apply queue never filled after %d appends: Pebble did not stall", n)
		}
		rec, uses := genRecord(base, n)
		if err := l.Append(rec, uses); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if b, _, _ := l.ApplyBacklog(); b == 0 {
		t.Fatal("congested with an empty backlog")
	}

	done := make(chan error, 1)
	go func() { done <- l.Close() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "journal is kept") {
			t.Fatalf("Close with Pebble stalled: %v; want an error saying the journal is kept", err)
		}
		t.Logf("Close after %d acknowledged appends: %v", n, err)
	case <-time.After(30 * time.Second):
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		t.Fatal("Close hung on a stalled Pebble")
	}

	armed.Store(false)
	close(release)
	released = true
	var l2 *Ledger
	deadline = time.Now().Add(30 * time.Second)
	for {
		// The stalled instance's own Pebble close finishes once the
		// disk answers; until then its lock holds the directory.
		if l2, err = Open(Config{Dir: dir, NodeID: "node-1"}); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("reopen after the stall: %v", err)
	}
	t.Cleanup(func() { _ = l2.Close() })
	if got := countKeys(t, l2, prefixRecord); got != n {
		t.Fatalf("%d records after reopening, want the %d acknowledged", got, n)
	}
}
