package main

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestSinkAnswersEveryExportAndCountsIt(t *testing.T) {
	s := &sink{}
	srv := httptest.NewServer(s.handler())
	defer srv.Close()
	for _, p := range []struct{ path, body string }{{"/v1/traces", "abc"}, {"/v1/traces", "de"}, {"/v1/logs", "f"}} {
		resp, err := http.Post(srv.URL+p.path, "application/x-protobuf", strings.NewReader(p.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Fatalf("POST %s: %s %q, want 200 with an OTLP protobuf answer", p.path, resp.Status, resp.Header.Get("Content-Type"))
		}
	}
	resp, err := http.Get(srv.URL + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st map[string]int64
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"trace_exports": 2, "trace_bytes": 5, "log_exports": 1, "log_bytes": 1}
	for k, v := range want {
		if st[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, st[k], v, st)
		}
	}
}

func TestSummarizeTracingComparesEachNodeWithTracingOff(t *testing.T) {
	run := func(rps, gwCPU float64) *RunResult {
		return &RunResult{Throughput: rps, Usage: Usage{GatewayCPU: gwCPU}}
	}
	off := &TracingRow{Target: "off", Runs: []*RunResult{run(1000, 0.5), run(3000, 0.5), run(2000, 0.5)}, sink: []float64{0, 0, 0}}
	on := &TracingRow{Target: "traces", Runs: []*RunResult{run(1800, 0.6), run(1700, 0.6), run(9000, 0.6)}, sink: []float64{0.01, 0.03, 0.02}}
	summarizeTracing([]*TracingRow{on, off})
	if off.Median.Throughput != 2000 || on.Median.Throughput != 1800 {
		t.Fatalf("medians %v and %v, want 2000 and 1800", off.Median.Throughput, on.Median.Throughput)
	}
	if on.VsOff != 0.9 || off.VsOff != 1 {
		t.Errorf("vs off: traces %v, off %v; want 0.9 and 1", on.VsOff, off.VsOff)
	}
	if on.GatewayUSPerR != 0.6/1800*1e6 || on.SinkCPU != 0.02 {
		t.Errorf("traces: %v µs of gateway CPU per request, receiver %v cores", on.GatewayUSPerR, on.SinkCPU)
	}
	// per round, all processes: off 500, 166.7, 250 µs; on 338.9, 370.6, 68.9 µs
	if want := 250 / ((0.6 + 0.01) / 1800 * 1e6); math.Abs(on.CPUVsOff-want) > 1e-9 {
		t.Errorf("CPU-bound throughput vs off %v, want %v", on.CPUVsOff, want)
	}
}
