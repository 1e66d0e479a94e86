package telemetry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"

	"github.com/tollgate/tollgate/node/telemetry"
	"github.com/tollgate/tollgate/node/telemetry/otlptest"
)

func TestSettingsFollowTheStandardVariables(t *testing.T) {
	cases := []struct {
		name                  string
		env                   map[string]string
		traces, logs, metrics string
		wantErr, off          bool
	}{
		{name: "nothing set is off", off: true},
		{name: "one endpoint turns on all three, http by default",
			env:    map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
			traces: telemetry.ProtocolHTTP, logs: telemetry.ProtocolHTTP, metrics: telemetry.ProtocolHTTP},
		{name: "grpc for all",
			env:    map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			traces: telemetry.ProtocolGRPC, logs: telemetry.ProtocolGRPC, metrics: telemetry.ProtocolGRPC},
		{name: "metrics only, over grpc",
			env:     map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://x:4317", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"},
			metrics: telemetry.ProtocolGRPC},
		{name: "metrics exporter none",
			env:    map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_METRICS_EXPORTER": "none"},
			traces: telemetry.ProtocolHTTP, logs: telemetry.ProtocolHTTP},
		{name: "prometheus metrics exporter refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_METRICS_EXPORTER": "prometheus"}, wantErr: true},
		{name: "per-signal endpoint and protocol",
			env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x:4317", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
				"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
			traces: telemetry.ProtocolGRPC},
		{name: "logs only", env: map[string]string{"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://x:4318/v1/logs"},
			logs: telemetry.ProtocolHTTP},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"},
			logs: telemetry.ProtocolHTTP, metrics: telemetry.ProtocolHTTP},
		{name: "sdk disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}, off: true},
		{name: "json protocol refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: true},
		{name: "other exporter refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := telemetry.SettingsFrom(func(k string) string { return c.env[k] })
			if c.wantErr {
				if err == nil {
					t.Fatalf("want an error, got %+v", s)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.TracesProtocol != c.traces || s.LogsProtocol != c.logs || s.MetricsProtocol != c.metrics || s.Off() != c.off {
				t.Fatalf("got %+v (off %v), want traces %q logs %q metrics %q off %v", s, s.Off(), c.traces, c.logs, c.metrics, c.off)
			}
		})
	}
}

func TestOffWithoutEndpointHasNoTracerNorLoggerNorMeter(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "")
	tel, err := telemetry.New(context.Background(), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if tel.Tracer() != nil || tel.Logger() != nil || tel.Meter() != nil {
		t.Fatal("telemetry without an endpoint must be off")
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var none *telemetry.Telemetry
	if none.Tracer() != nil || none.Meter() != nil || none.Shutdown(context.Background()) != nil {
		t.Fatal("nil telemetry must be off")
	}
}

// TestShutdownFlushesSpansLogsAndMetrics exports over each protocol to a
// real receiver; the batches' delays and the metrics' interval are long,
// so only Shutdown sends them.
func TestShutdownFlushesSpansLogsAndMetrics(t *testing.T) {
	for _, proto := range []string{telemetry.ProtocolGRPC, telemetry.ProtocolHTTP} {
		t.Run(proto, func(t *testing.T) {
			rv := otlptest.Start(t)
			addr := rv.HTTPAddr
			if proto == telemetry.ProtocolGRPC {
				addr = rv.GRPCAddr
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
			t.Setenv("OTEL_SERVICE_NAME", "tollgate-test")
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
			t.Setenv("OTEL_BLRP_SCHEDULE_DELAY", "600000")
			t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "600000")
			tel, err := telemetry.New(context.Background(), "v1", nil)
			if err != nil {
				t.Fatal(err)
			}
			_, span := tel.Tracer().Start(context.Background(), "chat m")
			span.End()
			var r otellog.Record
			r.SetBody(attribute.StringValue("request"))
			tel.Logger().Emit(context.Background(), r)
			h, err := tel.Meter().Float64Histogram("gen_ai.server.request.duration")
			if err != nil {
				t.Fatal(err)
			}
			h.Record(context.Background(), 0.5)
			if n := len(rv.Spans()); n != 0 {
				t.Fatalf("%d spans before shutdown: the batch delay should hold them", n)
			}
			if err := tel.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if s := rv.Spans(); len(s) != 1 || s[0].GetName() != "chat m" {
				t.Fatalf("spans after shutdown: %v", s)
			}
			if l := rv.Logs(); len(l) != 1 || otlptest.Value(l[0].GetBody()) != "request" {
				t.Fatalf("logs after shutdown: %v", l)
			}
			via := "http"
			if proto == telemetry.ProtocolGRPC {
				via = "grpc"
			}
			if ex := rv.Exports(); ex[via+" traces"] != 1 || ex[via+" logs"] != 1 || ex[via+" metrics"] != 1 {
				t.Fatalf("exports %v, want one trace, one log and one metrics export over %s", ex, via)
			}
			if m := rv.LastMetrics()["gen_ai.server.request.duration"]; m.GetHistogram().GetDataPoints()[0].GetCount() != 1 {
				t.Fatalf("metrics after shutdown: %v", m)
			}
			if !rv.HasService("tollgate-test") {
				t.Fatal("OTEL_SERVICE_NAME did not name the service")
			}
		})
	}
}

func TestBadProtocolIsAnError(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if _, err := telemetry.New(context.Background(), "v1", nil); err == nil {
		t.Fatal("http/json should be refused")
	}
}
