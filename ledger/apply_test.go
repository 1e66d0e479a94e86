package ledger

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// stallFS holds every sstable creation while armed: Pebble cannot flush,
// its memtables fill up, and then its commits stall, as on a disk that has
// stopped answering.
type stallFS struct {
	vfs.FS
	armed   *atomic.Bool
	release chan struct{}
}

func (fs stallFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if fs.armed.Load() && strings.HasSuffix(name, ".sst") {
		<-fs.release
	}
	return fs.FS.Create(name, c)
}

// TestPebbleStallDoesNotStallAppends: appends wait for the journal only.
// With Pebble stalled, they go on being acknowledged into the apply queue
// until it is half full (Congested, for /readyz and /metrics), and once
// the disk answers again every record reaches Pebble.
func TestPebbleStallDoesNotStallAppends(t *testing.T) {
	oldBytes := applyQueueBytes
	applyQueueBytes = 4 << 20
	t.Cleanup(func() { applyQueueBytes = oldBytes })
	var armed atomic.Bool
	release := make(chan struct{})
	baseFS = stallFS{vfs.Default, &armed, release}
	t.Cleanup(func() { baseFS = vfs.Default })
	dir := t.TempDir()
	l := openTest(t, dir, 0)
	armed.Store(true)
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})

	const n = 40_000 // about 12 MB of batches: more than Pebble's memtables and the queue hold
	base := testBase()
	done := make(chan struct{})
	go func() {
		defer close(done)
		appendRange(t, l, base, 0, n, 8)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !l.Congested() {
		select {
		case <-done:
			t.Fatalf("all %d appends finished and the apply queue never filled: Pebble did not stall", n)
		default:
		}
		if time.Now().After(deadline) {
			b, by, _ := l.ApplyBacklog()
			t.Fatalf("appends stalled with Pebble before the apply queue filled (backlog %d batches, %d bytes)", b, by)
		}
		time.Sleep(5 * time.Millisecond)
	}
	batches, bytes, _ := l.ApplyBacklog()
	t.Logf("Pebble stalled; acknowledged appends waiting in the apply queue: %d batches, %d bytes", batches, bytes)

	armed.Store(false)
	close(release)
	released = true
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("appends did not finish after the disk came back")
	}
	if got := countKeys(t, l, prefixRecord); got != n {
		t.Fatalf("%d records in Pebble, want %d", got, n)
	}
	if b, by, waits := l.ApplyBacklog(); b != 0 || by != 0 {
		t.Errorf("after the stall: backlog %d batches %d bytes (%d waits for room); want none", b, by, waits)
	}
	if l.Congested() {
		t.Error("still congested after the backlog drained")
	}
}
