package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeSnapMeta puts a Raft file snapshot's meta.json into dir/id.
func writeSnapMeta(t *testing.T, dir, id, meta string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, id), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, id, "meta.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotIndexesReadsEveryMetaAndSkipsBrokenOnes(t *testing.T) {
	dir := t.TempDir()
	writeSnapMeta(t, dir, "2-1200-1", `{"Version":1,"ID":"2-1200-1","Index":1200,"Term":2,"Size":99}`)
	writeSnapMeta(t, dir, "2-1500-2", `{"Version":1,"ID":"2-1500-2","Index":1500,"Term":2}`)
	writeSnapMeta(t, dir, "2-1600-3.tmp", `{"Version":1,`)
	if err := os.Mkdir(filepath.Join(dir, "no-meta"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := snapshotIndexes(dir)
	slices.Sort(got)
	if !slices.Equal(got, []uint64{1200, 1500}) {
		t.Fatalf("snapshotIndexes = %v, want [1200 1500]", got)
	}
	if got := snapshotIndexes(filepath.Join(dir, "missing")); len(got) != 0 {
		t.Fatalf("a missing folder: %v, want none", got)
	}
}

func TestJoinHowNeedsTheLeadersSnapshotIndex(t *testing.T) {
	for _, c := range []struct {
		joiner, leader []uint64
		want           string
	}{
		{[]uint64{1500}, []uint64{1200, 1500}, joinSnapshot},
		{[]uint64{1500, 1800}, []uint64{1500}, joinSnapshot},
		{[]uint64{1733}, []uint64{1200, 1500}, joinReplay}, // its own, after replaying
		{nil, []uint64{1500}, joinReplay},
		{[]uint64{1500}, nil, joinReplay},
	} {
		if got := joinHow(c.joiner, c.leader); got != c.want {
			t.Errorf("joinHow(%v, %v) = %q, want %q", c.joiner, c.leader, got, c.want)
		}
	}
}

func TestScaleReportOfOneNodeTellsTheJoinersCostAndTarget(t *testing.T) {
	dir := t.TempDir()
	r := &ScaleResults{Date: "2026-12-02", Config: ScaleConfig{Creates: 10, CreateTime: time.Second, Join: true},
		Steps: []*ScaleStep{{Keys: 1000, Creates: 10, Restarted: "node"},
			{Keys: 1_000_000, Creates: 10, Restarted: "node", JoinMs: 31_500, JoinHow: joinSnapshot, JoinCPUMs: 6200, JoinRSSMB: 812, JoinLeaderCPUMs: 1400}}}
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	for _, want := range []string{"At 1000000 keys one more node joined (--join, fresh data dir): ready 31500 ms after its start; it installed a snapshot.",
		"used 6200 ms of CPU and held 812 MB RSS when it turned ready; the leader used 1400 ms of CPU meanwhile",
		"Target: ready ≤ 30 s (not met)"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	if strings.Count(report, "joined") != 1 {
		t.Errorf("the step without a join has a join sentence:\n%s", report)
	}
	js, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"join": true`, `"join_cpu_ms": 6200`, `"join_rss_mb": 812`, `"join_leader_cpu_ms": 1400`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("results.json lacks %s", want)
		}
	}
}
