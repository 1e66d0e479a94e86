package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// fakeKeys answers CreateKey, failing from the failAt-th call on (0: never).
type fakeKeys struct {
	pb.KeyServiceClient
	calls  atomic.Int64
	failAt int64
}

func (f *fakeKeys) CreateKey(context.Context, *pb.CreateKeyRequest, ...grpc.CallOption) (*pb.CreateKeyResponse, error) {
	if n := f.calls.Add(1); f.failAt > 0 && n >= f.failAt {
		return nil, errors.New("refused")
	}
	return &pb.CreateKeyResponse{}, nil
}

func TestCreateLoopStopsAtLimitFromEveryCaller(t *testing.T) {
	f := &fakeKeys{}
	lat, err := createLoop(f, 4, 50, time.Now().Add(time.Minute), "k")
	if err != nil || len(lat) != 50 || f.calls.Load() != 50 {
		t.Fatalf("createLoop = %d latencies, %v; %d calls; want 50 of each", len(lat), err, f.calls.Load())
	}
}

func TestCreateLoopReportsAFailedCreate(t *testing.T) {
	f := &fakeKeys{failAt: 3}
	if _, err := createLoop(f, 2, 100, time.Now().Add(time.Minute), "k"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("createLoop with a refused create: %v", err)
	}
}

func TestPacedCreatesKeepTheirRate(t *testing.T) {
	f := &fakeKeys{}
	ok, failed := pacedCreates(f, 200, 100*time.Millisecond, "k")
	if ok != 20 || failed != 0 {
		t.Fatalf("200/s for 100 ms: %d created, %d failed; want 20 and 0", ok, failed)
	}
}

func TestChatSummaryAveragesTheMiddleTwoAndRatiosEachPair(t *testing.T) {
	run := func(writes bool, rps, p99us float64) *ChatRun {
		return &ChatRun{Writes: writes, Result: &RunResult{Throughput: rps, Lat: Percentiles{P99: p99us}}}
	}
	f := &ChatFigures{Runs: []*ChatRun{run(false, 1000, 10_000), run(true, 800, 30_000), run(true, 600, 20_000), run(false, 3000, 14_000)}}
	f.summarize()
	if f.QuietRPS != 2000 || f.WritesRPS != 700 || f.QuietP99Ms != 12 || f.WritesP99Ms != 25 {
		t.Fatalf("medians %+v", f)
	}
	if f.ThroughputRatio != 0.35 || f.P99Ratio != 25.0/12 {
		t.Fatalf("ratios %.3f, %.3f", f.ThroughputRatio, f.P99Ratio)
	}
	// Pairs: (alone 1000, writes 800), (writes 600, alone 3000).
	if !slices.Equal(f.PairThroughputRatios, []float64{0.8, 0.2}) || !slices.Equal(f.PairP99Ratios, []float64{3, 20_000.0 / 14_000}) {
		t.Fatalf("pair ratios %v, %v", f.PairThroughputRatios, f.PairP99Ratios)
	}
	var b strings.Builder
	f.write(&b, ChatConfig{})
	if !strings.Contains(b.String(), "Within each pair of adjacent runs: throughput 0.80, 0.20; p99 3.00, 1.43.") {
		t.Fatalf("report lacks the pair ratios:\n%s", b.String())
	}
}

func TestScaleReportOfClusterNamesEveryNodeAndTheJoin(t *testing.T) {
	dir := t.TempDir()
	r := &ScaleResults{Date: "2026-12-01", Config: ScaleConfig{Nodes: 3, Creates: 10, CreateTime: time.Second},
		Steps: []*ScaleStep{{Keys: 1000, Creates: 10, Restarted: "n1", JoinMs: 1234, JoinHow: "installed a snapshot",
			Nodes: []NodeFigures{{Node: "n1", CPUPerCreateMs: 0.5, RSSMB: 30}, {Node: "n2", CPUPerCreateMs: 1.5, RSSMB: 40}, {Node: "n3", CPUPerCreateMs: 0.6, RSSMB: 35}}}},
		Chat: &ChatFigures{Keys: 1000, Node: "n2", ThroughputRatio: 0.9, P99Ratio: 1.1}}
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"A cluster of 3 nodes", "n1 0.500 (net 0.000) / n2 1.500 (net 0.000) / n3 0.600 (net 0.000) ms",
		"n1 30 / n2 40 / n3 35 MB", "ready 1234 ms after its start; it installed a snapshot", "to n2", "Throughput with writes ÷ alone: 0.90"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report lacks %q:\n%s", want, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "results.json")); err != nil {
		t.Fatal(err)
	}
}

func TestChatReportSaysWhichTargetsTheRatiosMet(t *testing.T) {
	for _, c := range []struct {
		rps, p99 float64
		want     []string
	}{
		{0.95, 1.1, []string{"0.95 (target ≥ 0.9: met)", "1.10 (target ≤ 1.2: met)"}},
		{0.88, 1.79, []string{"0.88 (target ≥ 0.9: not met)", "1.79 (target ≤ 1.2: not met)"}},
		{0, 0, []string{"(target ≥ 0.9: not met)", "(target ≤ 1.2: not met)"}}, // no runs measured
	} {
		var b strings.Builder
		f := &ChatFigures{Keys: 250000, Node: "node", ThroughputRatio: c.rps, P99Ratio: c.p99, LoadAvg: "1.00 2.00 3.00 / 4.00 5.00 6.00"}
		f.write(&b, ChatConfig{Clients: 8, Dur: 10 * time.Second, CreateRate: 200})
		for _, want := range append(c.want, "200/s", "before / after the chat runs: 1.00 2.00 3.00 / 4.00 5.00 6.00") {
			if !strings.Contains(b.String(), want) {
				t.Errorf("ratios %.2f, %.2f: report lacks %q:\n%s", c.rps, c.p99, want, b.String())
			}
		}
	}
}
