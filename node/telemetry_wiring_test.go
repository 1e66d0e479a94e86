package node

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/node/proxy"
)

// A node whose --access-log cannot be opened, or whose OTLP protocol is
// unknown, does not start, and says why; one that starts closes its
// access log again (its listeners and stores too: the next start on the
// same ports and dir works).
func TestTelemetryConfigFailuresStopTheStart(t *testing.T) {
	cfg := baseConfig(t, "tel", testLogger(t))
	cfg.Telemetry.AccessLog = filepath.Join(t.TempDir(), "no-such-dir", "access.jsonl")
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "--access-log") {
		t.Fatalf("New with an access log in a missing directory: %v", err)
	}
	cfg.Telemetry.AccessLog = ""
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "http/json") {
		t.Fatalf("New with an unknown OTLP protocol: %v", err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	cfg.Telemetry.AccessLog = filepath.Join(t.TempDir(), "access.jsonl")
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n.accessLog == nil {
		t.Fatal("the access log was not opened")
	}
	n.Close()
	if err := n.accessLog.Close(); err == nil {
		t.Fatal("Close left the access log open")
	}
}

// With traces on, the node's registry counts the spans the export queue
// dropped (none yet); with them off there is no such series.
func TestTracingExposesTheDroppedSpansCounter(t *testing.T) {
	for _, on := range []bool{false, true} {
		endpoint := ""
		if on {
			endpoint = "http://127.0.0.1:1/v1/traces" // nothing is exported in this test
		}
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
		n := &Node{log: testLogger(t)}
		reg := prometheus.NewRegistry()
		var pc proxy.Config
		if err := n.wireTelemetry(&pc, reg); err != nil {
			t.Fatal(err)
		}
		n.closeTelemetry()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, mf := range mfs {
			if mf.GetName() == "tollgate_trace_spans_dropped_total" {
				found = mf.GetMetric()[0].GetCounter().GetValue() == 0
			}
		}
		if found != on {
			t.Fatalf("traces on %v: dropped-spans counter at 0 found %v", on, found)
		}
	}
}
