package raftstore

import (
	"bytes"
	"io"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

// gcPercent returns the GC percent in effect.
func gcPercent(t *testing.T) int {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// percentReader records the GC percent when it is first read.
type percentReader struct {
	io.Reader
	t    *testing.T
	seen int
}

func (r *percentReader) Read(p []byte) (int, error) {
	if r.seen == 0 {
		r.seen = gcPercent(r.t)
	}
	return r.Reader.Read(p)
}

// A restore runs at restoreGCPercent and puts the GC percent back when it
// ends, whether it succeeded or not.
func TestRestoreRaisesGCPercentWhileItRuns(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, data := range [][]byte{snapBytes(t, rich(t).state()), []byte("\x00TGSNAP garbage")} {
		r := &percentReader{Reader: bytes.NewReader(data), t: t}
		err := newFSM().Restore(io.NopCloser(r))
		if r.seen != restoreGCPercent {
			t.Errorf("GC percent during the restore (err %v) = %d, want %d", err, r.seen, restoreGCPercent)
		}
		if got := gcPercent(t); got != 100 {
			t.Errorf("GC percent after the restore (err %v) = %d, want 100", err, got)
		}
	}
}

// Overlapping restores put the GC percent back when the last one ends, and
// one that was set higher than restoreGCPercent is left alone.
func TestBoostGCOverlapsAndNeverLowers(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	a := boostGC()
	b := boostGC()
	a()
	a() // twice: counted once
	if got := gcPercent(t); got != restoreGCPercent {
		t.Fatalf("GC percent with one restore still running = %d, want %d", got, restoreGCPercent)
	}
	b()
	if got := gcPercent(t); got != 100 {
		t.Fatalf("GC percent after both = %d, want 100", got)
	}
	debug.SetGCPercent(1000)
	c := boostGC()
	if got := gcPercent(t); got != 1000 {
		t.Fatalf("GC percent 1000 during a restore = %d", got)
	}
	c()
	if got := gcPercent(t); got != 1000 {
		t.Fatalf("GC percent 1000 after a restore = %d", got)
	}
}
