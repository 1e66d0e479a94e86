package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGCCyclesReadsTheNodesGoCollectorCount(t *testing.T) {
	exposition := "# HELP go_gc_duration_seconds A summary of the wall-time pause.\n# TYPE go_gc_duration_seconds summary\n" +
		"go_gc_duration_seconds{quantile=\"0\"} 1.2e-05\ngo_gc_duration_seconds_sum 0.0123\ngo_gc_duration_seconds_count 417\n" +
		"go_goroutines 42\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, exposition)
	}))
	defer srv.Close()
	n, err := gcCycles(&Gateway{HTTP: strings.TrimPrefix(srv.URL, "http://")})
	if err != nil || n != 417 {
		t.Fatalf("gcCycles = %d, %v; want 417", n, err)
	}
}

func TestGCCyclesFailsWithoutTheCount(t *testing.T) {
	if n, err := parseGCCycles(strings.NewReader("go_goroutines 42\n")); err == nil {
		t.Fatalf("parseGCCycles = %d without the count, want an error", n)
	}
	if _, err := parseGCCycles(strings.NewReader("go_gc_duration_seconds_count x\n")); err == nil {
		t.Fatal("parseGCCycles accepted a count that is not a number")
	}
}

func TestScaleReportSaysHowManyGCCyclesTheCreatesSpanned(t *testing.T) {
	var b strings.Builder
	writeGCCycles(&b, []*ScaleStep{{Keys: 1000, Nodes: []NodeFigures{{Node: "node", GCCycles: 3}}},
		{Keys: 1_000_000, Nodes: []NodeFigures{{Node: "node", GCCycles: 1}}}})
	if !strings.Contains(b.String(), "node at 1000 keys 3; node at 1000000 keys 1.") {
		t.Fatalf("report %q lacks the cycles of each step", b.String())
	}
}
