package main

import (
	"math"
	"strings"
	"testing"
)

func TestChatCPUChargesTheCreatesWhatTheirRunsUsedBeyondTheAnswers(t *testing.T) {
	run := func(writes bool, rps, node, mock, bench, creates float64) *ChatRun {
		return &ChatRun{Writes: writes, CreatesPerSec: creates,
			Result: &RunResult{Throughput: rps, Usage: Usage{GatewayCPU: node, MockCPU: mock, LoadCPU: bench}}}
	}
	// Alone: 0.5 ms of node and 0.3 ms of bench per answer. With writes at
	// 200/s and 800 answers/s, the node used 0.2 cores and the bench 0.06
	// beyond the answers: 1 ms and 0.3 ms per create, 13% of two cores.
	runs := []*ChatRun{
		run(false, 1000, 0.5, 0.2, 0.3, 0),
		run(true, 800, 0.6, 0.16, 0.30, 200),
		run(true, 800, 0.6, 0.16, 0.30, 200),
		run(false, 1000, 0.5, 0.2, 0.3, 0),
	}
	c := chatCPU(runs, 2)
	if c == nil {
		t.Fatal("no CPU split from runs with CPU figures")
	}
	near := func(name string, got, want float64) {
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("node ms per create", c.NodeMsPerCreate, 1)
	near("client ms per create", c.ClientMsPerCreate, 0.3)
	near("creates' share", c.CreatesShare, 0.13)
	near("cores alone", c.AloneCores, 1.0)
	near("cores with writes", c.WritesCores, 1.06)

	var b strings.Builder
	c.write(&b, 0.8)
	for _, want := range []string{"1.00 ms of the node's CPU", "0.30 ms of the bench's", "13% of the machine, against 20% of the chat's throughput lost"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report %q lacks %q", b.String(), want)
		}
	}
}

func TestChatCPUIsAbsentWithoutCPUFigures(t *testing.T) {
	runs := []*ChatRun{{Writes: false, Result: &RunResult{Throughput: 1000}}, {Writes: true, CreatesPerSec: 200, Result: &RunResult{Throughput: 800}}}
	if c := chatCPU(runs, 2); c != nil {
		t.Fatalf("chatCPU = %+v from runs without CPU figures, want nil", c)
	}
}
