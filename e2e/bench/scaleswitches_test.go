package main

import (
	"os"
	"testing"
)

func TestParseSwitchesAddsVoluntaryAndInvoluntary(t *testing.T) {
	status := []byte("Name:\ttollgate\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n")
	if got := parseSwitches(status); got != 127 {
		t.Fatalf("parseSwitches = %d, want 127", got)
	}
	if got := parseSwitches([]byte("Name:\tx\n")); got != 0 {
		t.Fatalf("no switch lines: %d, want 0", got)
	}
}

func TestContextSwitchesCountsEveryThreadOfAProcess(t *testing.T) {
	n, err := contextSwitches(os.Getpid())
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	done := make(chan struct{})
	go func() { close(done) }() // at least one more wait and wake-up
	<-done
	m, err := contextSwitches(os.Getpid())
	if err != nil || n == 0 || m < n {
		t.Fatalf("context switches %d then %d, %v", n, m, err)
	}
}
