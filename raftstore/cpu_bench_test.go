package raftstore

import (
	"syscall"
	"testing"
)

// processCPU returns the CPU time (user and system) the process has used,
// in nanoseconds: what a benchmark's work cost on every core, the GC's
// included, whatever the wall time on a shared machine.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
