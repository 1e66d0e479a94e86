// Package telemetry sets up OpenTelemetry for a node: traces, request logs
// and the GenAI metrics exported over OTLP (gRPC or HTTP/protobuf),
// configured only by the standard OTEL_* environment variables. With no
// OTLP endpoint set it is off: Tracer, Logger and Meter return nil, and
// the data plane then does no such work at all. Spans are recorded by a
// tracer of its own (tracer.go: pooled records, a bounded queue, its own
// OTLP encoder), not the SDK's, whose per-span work cost the gateway most
// of tracing's price; logs and metrics go through the SDK.
//
// Variables read (the exporters and the SDK read the rest of theirs):
//
//	OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
//	OTEL_EXPORTER_OTLP_LOGS_ENDPOINT,
//	OTEL_EXPORTER_OTLP_METRICS_ENDPOINT  where to export; none: off
//	OTEL_EXPORTER_OTLP_PROTOCOL (and _TRACES_/_LOGS_/_METRICS_PROTOCOL)
//	                                     grpc or http/protobuf (default)
//	OTEL_EXPORTER_OTLP_HEADERS (and _TRACES_/_LOGS_/_METRICS_HEADERS)
//	OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
//	OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG
//	OTEL_BSP_* (read here), OTEL_BLRP_*, OTEL_METRIC_EXPORT_INTERVAL (and _TIMEOUT)
//	OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE
//	OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none,
//	OTEL_LOGS_EXPORTER=none, OTEL_METRICS_EXPORTER=none
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

// ScopeName is the instrumentation scope of Tollgate's spans and logs.
const ScopeName = "github.com/tollgate/tollgate"

// Protocols of OTLP.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Settings is what the environment asks for.
type Settings struct {
	// TracesProtocol, LogsProtocol and MetricsProtocol are "" when that
	// signal is off.
	TracesProtocol, LogsProtocol, MetricsProtocol string
}

// Off reports whether nothing is exported.
func (s Settings) Off() bool {
	return s.TracesProtocol == "" && s.LogsProtocol == "" && s.MetricsProtocol == ""
}

// SettingsFrom reads the settings from getenv (os.Getenv in a node).
func SettingsFrom(getenv func(string) string) (Settings, error) {
	var s Settings
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return s, nil
	}
	var err error
	if s.TracesProtocol, err = signal(getenv, "TRACES"); err != nil {
		return Settings{}, err
	}
	if s.LogsProtocol, err = signal(getenv, "LOGS"); err != nil {
		return Settings{}, err
	}
	if s.MetricsProtocol, err = signal(getenv, "METRICS"); err != nil {
		return Settings{}, err
	}
	return s, nil
}

// signal returns the protocol one signal ("TRACES", "LOGS", "METRICS") is exported
// with, "" when it is not.
func signal(getenv func(string) string, name string) (string, error) {
	switch exp := strings.TrimSpace(getenv("OTEL_" + name + "_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		return "", nil
	default:
		return "", fmt.Errorf("OTEL_%s_EXPORTER=%q: only otlp and none are supported", name, exp)
	}
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_"+name+"_ENDPOINT") == "" {
		return "", nil
	}
	p := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name + "_PROTOCOL"))
	if p == "" {
		p = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch p {
	case "", ProtocolHTTP:
		return ProtocolHTTP, nil
	case ProtocolGRPC:
		return ProtocolGRPC, nil
	}
	return "", fmt.Errorf("OTLP protocol %q for %s: want grpc or http/protobuf", p, strings.ToLower(name))
}

// Telemetry holds a node's tracer, logger and meter providers. The zero
// value and nil are off.
type Telemetry struct {
	spans  *spanQueue
	lp     *sdklog.LoggerProvider
	mp     *sdkmetric.MeterProvider
	tracer *Tracer
	logger otellog.Logger
	meter  metric.Meter
}

// New sets up what the environment asks for; log receives export errors.
// Nothing is exported (and nothing started) when the environment sets no
// OTLP endpoint.
func New(ctx context.Context, version string, log *slog.Logger) (*Telemetry, error) {
	s, err := SettingsFrom(os.Getenv)
	if err != nil || s.Off() {
		return &Telemetry{}, err
	}
	if log != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("telemetry export failed", "err", err) }))
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "tollgate"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	t := &Telemetry{}
	if s.TracesProtocol != "" {
		if t.tracer, err = newTracer(ctx, s.TracesProtocol, res, version, log); err != nil {
			return nil, err
		}
		t.spans = t.tracer.q
	}
	if s.LogsProtocol != "" {
		exp, err := newLogExporter(ctx, s.LogsProtocol)
		if err != nil {
			_ = t.Shutdown(ctx)
			return nil, err
		}
		// The request log's attributes are unique by construction: the
		// SDK's de-duplication (a map per record) would only cost.
		t.lp = sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(exp)), sdklog.WithResource(res),
			sdklog.WithAllowKeyDuplication())
		t.logger = t.lp.Logger(ScopeName, otellog.WithInstrumentationVersion(version))
	}
	if s.MetricsProtocol != "" {
		exp, err := newMetricExporter(ctx, s.MetricsProtocol)
		if err != nil {
			_ = t.Shutdown(ctx)
			return nil, err
		}
		// The export interval comes from OTEL_METRIC_EXPORT_INTERVAL
		// (default 60 s), the temporality from the exporter's variable.
		t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)), sdkmetric.WithResource(res))
		t.meter = t.mp.Meter(ScopeName, metric.WithInstrumentationVersion(version))
	}
	return t, nil
}

// newTracer is the tracer exporting over OTLP with protocol (the client
// reads the OTEL_EXPORTER_OTLP_* variables), sampling as
// OTEL_TRACES_SAMPLER says and batching as OTEL_BSP_* say.
func newTracer(ctx context.Context, protocol string, res *resource.Resource, version string, log *slog.Logger) (*Tracer, error) {
	smp, serr := samplerFrom(os.Getenv)
	qc, qerr := queueConfigFrom(os.Getenv)
	var client otlptrace.Client
	if protocol == ProtocolGRPC {
		client = otlptracegrpc.NewClient()
	} else {
		hc, herr := httpConfigFrom(os.Getenv, os.ReadFile)
		qerr = errors.Join(qerr, herr)
		client = newHTTPExporter(hc)
	}
	if err := errors.Join(serr, qerr); err != nil && log != nil {
		log.Warn("telemetry: bad setting, using the default", "err", err) // as the SDK: not a failure
	}
	q, err := newSpanQueue(ctx, client, qc, res, &commonpb.InstrumentationScope{Name: ScopeName, Version: version})
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter (%s): %w", protocol, err)
	}
	return &Tracer{sampler: smp, q: q}, nil
}

// newExporter makes a signal's OTLP exporter for protocol (the exporters
// read the rest of their OTEL_EXPORTER_OTLP_* variables themselves).
func newExporter[E any](ctx context.Context, signal, protocol string, viaGRPC, viaHTTP func(context.Context) (E, error)) (E, error) {
	create := viaHTTP
	if protocol == ProtocolGRPC {
		create = viaGRPC
	}
	exp, err := create(ctx)
	if err != nil {
		return exp, fmt.Errorf("OTLP %s exporter (%s): %w", signal, protocol, err)
	}
	return exp, nil
}

func newLogExporter(ctx context.Context, protocol string) (sdklog.Exporter, error) {
	return newExporter(ctx, "log", protocol,
		func(ctx context.Context) (sdklog.Exporter, error) { return otlploggrpc.New(ctx) },
		func(ctx context.Context) (sdklog.Exporter, error) { return otlploghttp.New(ctx) })
}

func newMetricExporter(ctx context.Context, protocol string) (sdkmetric.Exporter, error) {
	return newExporter(ctx, "metric", protocol,
		func(ctx context.Context) (sdkmetric.Exporter, error) { return otlpmetricgrpc.New(ctx) },
		func(ctx context.Context) (sdkmetric.Exporter, error) { return otlpmetrichttp.New(ctx) })
}

// Tracer returns the tracer of the data plane; nil when traces are off.
func (t *Telemetry) Tracer() trace.Tracer {
	if t == nil || t.tracer == nil {
		return nil // not a typed nil in the interface
	}
	return t.tracer
}

// DroppedSpans is how many spans were dropped because the export queue
// was full (0 when traces are off).
func (t *Telemetry) DroppedSpans() uint64 {
	if t == nil || t.spans == nil {
		return 0
	}
	return t.spans.Dropped()
}

// Logger returns the logger request logs are emitted to; nil when logs
// are off.
func (t *Telemetry) Logger() otellog.Logger {
	if t == nil {
		return nil
	}
	return t.logger
}

// Meter returns the meter the GenAI metrics are recorded with; nil when
// metrics are off.
func (t *Telemetry) Meter() metric.Meter {
	if t == nil {
		return nil
	}
	return t.meter
}

// Shutdown exports what is still queued (and the metrics' last values) and
// stops the exporters, within ctx.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.spans != nil {
		errs = append(errs, t.spans.shutdown(ctx))
	}
	if t.lp != nil {
		errs = append(errs, t.lp.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
